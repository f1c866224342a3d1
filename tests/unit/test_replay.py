"""The replay client against an in-process fake endpoint (httpx.MockTransport).

Only this room's logic is tested here; the real vLLM server is in tests/integration.
"""

import json

import httpx
import pytest

from tuner.errors import UsageError
from tuner.replay import LoadSpec, RequestResult, replay, summarize
from tuner.replay.client import request_body, start_offsets
from tuner.workload import Request

BASE = "http://fake"


def sse(*chunks: dict) -> bytes:
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


def completion_stream(tokens: int) -> bytes:
    chunks = [{"choices": [{"text": "ab"}]} for _ in range(3)]
    return sse(*chunks, {"choices": [], "usage": {"completion_tokens": tokens, "prompt_tokens": 5}})


def fake_server(seen: list):
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((request.url.path, body))
        if body.get("max_tokens") == 13:
            return httpx.Response(500, text="engine exploded")
        if request.url.path == "/v1/chat/completions":
            return httpx.Response(200, content=sse(
                {"choices": [{"delta": {"role": "assistant", "content": ""}}]},
                {"choices": [{"delta": {"content": "hi"}}]},
                {"choices": [], "usage": {"completion_tokens": 4, "prompt_tokens": 3}}))
        return httpx.Response(200, content=completion_stream(body["max_tokens"]))
    return httpx.MockTransport(handler)


def test_bodies_follow_the_openai_api():
    path, body = request_body(Request(line=1, prompt="p", temperature=0, seed=4), "m", 99)
    assert path == "/v1/completions"
    assert body == {"model": "m", "prompt": "p", "stream": True, "max_tokens": 99, "temperature": 0,
                    "seed": 4, "stream_options": {"include_usage": True}}
    messages = ({"role": "user", "content": "q"},)
    path, body = request_body(Request(line=2, messages=messages, max_tokens=7, output_tokens=5), "m", 99)
    assert path == "/v1/chat/completions"
    assert body["messages"] == list(messages)
    # The captured length wins, and is generated in full.
    assert body["max_tokens"] == 5 and body["ignore_eos"] is True


def test_replay_counts_tokens_from_usage_and_reports_failures():
    seen: list = []
    requests = [
        Request(line=1, prompt="a", max_tokens=10),
        Request(line=2, messages=({"role": "user", "content": "b"},)),
        Request(line=3, prompt="c", max_tokens=13),  # the fake answers HTTP 500
    ]
    done: list[RequestResult] = []
    results, duration = replay(BASE, "m", requests, LoadSpec("concurrency", 2),
                               default_max_tokens=20, on_result=done.append,
                               transport=fake_server(seen))
    assert len(done) == 3 and len(seen) == 3
    by_id = {r.request_id: r for r in results}
    assert by_id["line 1"].ok and by_id["line 1"].output_tokens == 10
    assert by_id["line 2"].ok and by_id["line 2"].output_tokens == 4
    failed = by_id["line 3"]
    assert not failed.ok and failed.error == "HTTP 500: engine exploded"
    summary = summarize(results, duration)
    assert (summary.completed, summary.failed, summary.output_tokens) == (2, 1, 14)
    assert summary.errors == ("1 x HTTP 500: engine exploded",)
    assert summary.output_tokens_per_s == pytest.approx(14 / duration)


def test_stream_without_usage_is_a_failure():
    transport = httpx.MockTransport(lambda r: httpx.Response(200, content=sse({"choices": [{"text": "x"}]})))
    (result,), _ = replay(BASE, "m", [Request(line=1, prompt="a")], LoadSpec(), transport=transport)
    assert not result.ok and "without a usage report" in result.error


def test_connection_error_is_a_failure():
    def refuse(request):
        raise httpx.ConnectError("connection refused", request=request)
    (result,), _ = replay(BASE, "m", [Request(line=1, prompt="a")], LoadSpec(),
                          transport=httpx.MockTransport(refuse))
    assert not result.ok and result.error.startswith("ConnectError")


def test_tpot_excludes_the_first_token():
    result = RequestResult("r", 0.0, ok=True, ttft_s=0.1, e2e_s=1.1, output_tokens=11)
    assert result.tpot_s == pytest.approx(0.1)
    assert RequestResult("r", 0.0, ok=True, ttft_s=0.1, e2e_s=0.1, output_tokens=1).tpot_s is None


def test_offsets_for_trace_and_rate():
    requests = [Request(line=i, prompt="x", arrival_s=a) for i, a in enumerate([5.0, 5.5, 7.0])]
    assert start_offsets(requests, LoadSpec("trace", time_scale=2)) == pytest.approx([0, 1, 4])
    rate = start_offsets(requests, LoadSpec("rate", rate=10, seed=1))
    assert rate[0] == 0 and rate == sorted(rate)
    assert rate == start_offsets(requests, LoadSpec("rate", rate=10, seed=1))  # reproducible
    with pytest.raises(UsageError, match="needs 'arrival_s'"):
        start_offsets([Request(line=1, prompt="x")], LoadSpec("trace"))


@pytest.mark.parametrize(("kwargs", "reason"), [
    ({"mode": "burst"}, "--load must be"),
    ({"concurrency": 0}, "--concurrency must be >= 1"),
    ({"mode": "rate"}, "--load rate needs --rate"),
    ({"mode": "trace", "time_scale": 0}, "--time-scale must be > 0"),
])
def test_bad_load_options(kwargs, reason):
    with pytest.raises(UsageError, match=reason):
        LoadSpec(**kwargs)
