"""The replay client against a fake OpenAI-compatible endpoint served on loopback.

Only this room's logic is tested here; the real vLLM server is in tests/integration.
"""

import asyncio
import json
import socket
import threading

import pytest
from aiohttp import web

from tuner.engine.server import free_port
from tuner.errors import UsageError
from tuner.replay import LoadSpec, RequestResult, replay, summarize
from tuner.replay.client import request_body, start_offsets, text_digest
from tuner.workload import Request


def sse(*chunks: dict) -> bytes:
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


class FakeServer:
    """Answers like vLLM's streaming endpoints; records what it was sent."""

    def __init__(self):
        self.seen: list = []
        self.peers: set = set()
        self.mode = "normal"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.seen.append((request.path, body))
        self.peers.add(request.transport.get_extra_info("peername"))
        if body.get("max_tokens") == 13:
            return web.Response(status=500, text="engine exploded")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if self.mode == "no-usage":
            await response.write(sse({"choices": [{"text": "x"}]}))
        elif self.mode == "spec":
            # vLLM with speculation, --per-request-spec-decode-metrics summary and
            # return_token_ids: the prefill's token, then one chunk per step of 1 + accepted
            # drafts (an empty final chunk carries none), and its own counts on the usage chunk.
            steps = [[7], [8, 9, 10], [11], [12, 13], []]
            await response.write(sse(*[{"choices": [{"text": "t" * len(ids), "token_ids": ids}]} for ids in steps],
                                     {"choices": [], "usage": {"completion_tokens": 7, "prompt_tokens": 300},
                                      "metrics": {"speculative_decoding": {
                                          "num_spec_steps": 3, "num_accepted_draft_tokens": 3,
                                          "num_draft_tokens": 9, "per_step_accepted": [2, 0, 1]}}}))
        elif body.get("n", 1) > 1:
            # vLLM: one choice per chunk, by index, interleaved as the choices progress; the usage
            # report totals all choices. The order changes from request to request.
            texts = [[f"c{i}-{t} " for t in range(body["max_tokens"])] for i in range(body["n"])]
            events = [(t, i) for i in range(body["n"]) for t in range(body["max_tokens"])]
            events.sort(key=lambda e: (e[0], (e[1] + len(self.seen)) % body["n"]))
            await response.write(sse(*[{"choices": [{"index": i, "text": texts[i][t]}]} for t, i in events],
                                     {"choices": [], "usage": {"completion_tokens": body["n"] * body["max_tokens"],
                                                               "prompt_tokens": 5}}))
        elif request.path == "/v1/chat/completions":
            await response.write(sse(
                {"choices": [{"delta": {"role": "assistant", "content": ""}}]},
                {"choices": [{"delta": {"content": "hi"}}]},
                {"choices": [], "usage": {"completion_tokens": 4, "prompt_tokens": 3}}))
        else:
            # One write per event, split mid-event too, as a real stream may arrive.
            payload = sse(*[{"choices": [{"text": "ab"}]} for _ in range(3)],
                          {"choices": [], "usage": {"completion_tokens": body["max_tokens"],
                                                    "prompt_tokens": 5}})
            for start in range(0, len(payload), 7):
                await response.write(payload[start:start + 7])
        await response.write_eof()
        return response


@pytest.fixture
def fake():
    server = FakeServer()
    app = web.Application()
    app.router.add_post("/v1/completions", server.handle)
    app.router.add_post("/v1/chat/completions", server.handle)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    port = free_port()
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{port}"
    yield server
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)


def test_bodies_follow_the_openai_api():
    path, body = request_body(Request(line=1, prompt="p", temperature=0, seed=4), "m", 99)
    assert path == "/v1/completions"
    # Every request asks for its token ids: a greedy one's locate where a config's output differs,
    # and every request's chunks give its acceptance per step.
    assert body == {"model": "m", "prompt": "p", "stream": True, "max_tokens": 99, "temperature": 0,
                    "seed": 4, "stream_options": {"include_usage": True}, "return_token_ids": True}
    messages = ({"role": "user", "content": "q"},)
    path, body = request_body(Request(line=2, messages=messages, max_tokens=7, output_tokens=5), "m", 99)
    assert path == "/v1/chat/completions"
    assert body["messages"] == list(messages)
    # The captured length wins, and is generated in full.
    assert body["max_tokens"] == 5 and body["ignore_eos"] is True


def test_replay_counts_tokens_from_usage_and_reports_failures(fake):
    requests = [
        Request(line=1, prompt="a", max_tokens=10, temperature=0),
        Request(line=2, messages=({"role": "user", "content": "b"},)),
        Request(line=3, prompt="c", max_tokens=13),  # the fake answers HTTP 500
    ]
    done: list[RequestResult] = []
    results, duration = replay(fake.url, "m", requests, LoadSpec("concurrency", 2),
                               default_max_tokens=20, on_result=done.append)
    assert len(done) == 3 and len(fake.seen) == 3
    by_id = {r.request_id: r for r in results}
    first = by_id["line 1"]
    assert first.ok and first.output_tokens == 10 and first.greedy and first.text_digest
    assert by_id["line 2"].ok and by_id["line 2"].output_tokens == 4 and not by_id["line 2"].greedy
    failed = by_id["line 3"]
    assert not failed.ok and failed.error == "HTTP 500: engine exploded"
    summary = summarize(results, duration)
    assert (summary.completed, summary.failed, summary.output_tokens) == (2, 1, 14)
    assert summary.errors == ("1 x HTTP 500: engine exploded",)
    assert summary.output_tokens_per_s == pytest.approx(14 / duration)


def test_same_text_same_digest_and_connections_are_reused(fake):
    requests = [Request(line=i, prompt="a", max_tokens=5) for i in range(12)]
    results, _ = replay(fake.url, "m", requests, LoadSpec("concurrency", 3))
    assert len({r.text_digest for r in results}) == 1
    # Streams are read to their end, so 12 requests share the 3 workers' connections.
    assert len(fake.peers) <= 3


def test_stream_without_usage_is_a_failure(fake):
    fake.mode = "no-usage"
    (result,), _ = replay(fake.url, "m", [Request(line=1, prompt="a")], LoadSpec())
    assert not result.ok and "without a usage report" in result.error


def test_connection_error_is_a_failure():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (result,), _ = replay(f"http://127.0.0.1:{port}", "m", [Request(line=1, prompt="a")], LoadSpec())
    assert not result.ok and result.error.startswith("ClientConnectorError")


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


def test_captured_fields_are_sent_as_captured():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    chat = Request(line=1, messages=({"role": "user", "content": "q"},), n=2, stop=("\n", "END"),
                   presence_penalty=0.5, frequency_penalty=-0.5, logprobs=True, top_logprobs=3,
                   response_format={"type": "json_object"}, tools=tools, tool_choice="auto",
                   temperature=0.8, top_k=5, max_tokens=64, output_tokens=10)
    _, body = request_body(chat, "m", 99)
    assert body["n"] == 2 and body["stop"] == ["\n", "END"] and body["top_k"] == 5
    assert (body["presence_penalty"], body["frequency_penalty"]) == (0.5, -0.5)
    assert (body["logprobs"], body["top_logprobs"]) == (True, 3)
    assert body["response_format"] == {"type": "json_object"} and body["tools"] == tools
    assert body["tool_choice"] == "auto"
    # output_tokens is one choice's length: vLLM's max_tokens is per choice too.
    assert body["max_tokens"] == 10 and body["ignore_eos"] is True
    _, plain = request_body(Request(line=2, prompt="p", stop="x", logprobs=0), "m", 99)
    assert plain["stop"] == "x" and plain["logprobs"] == 0 and "n" not in plain and "tools" not in plain


def test_n_choices_are_counted_per_choice(fake):
    requests = [Request(line=i, prompt="a", n=2, output_tokens=6, temperature=1.0) for i in range(2)]
    results, duration = replay(fake.url, "m", requests, LoadSpec())
    assert [r.choices for r in results] == [2, 2]
    assert [r.output_tokens for r in results] == [12, 12]  # the usage report: both choices
    # The two streams interleaved the choices differently; each choice's text is the same.
    expected = text_digest(["".join(f"c{i}-{t} " for t in range(6)) for i in range(2)])
    assert [r.text_digest for r in results] == [expected, expected]
    first = results[0]
    assert first.tokens_per_choice == 6
    assert first.tpot_s == pytest.approx((first.e2e_s - first.ttft_s) / 5)  # per choice, not / 11
    assert summarize(results, duration).output_tokens == 24


def test_a_server_is_steady_once_a_warm_up_replay_no_longer_rises():
    """--warmup-until-steady: the climb seen on an H200 (1603, 1936, 2128 tok/s, then 2131) is
    still rising until the last replay gains less than 3 % over the one before."""
    from tuner.measure.trial import steady

    assert not steady([]) and not steady([1603.0])  # one replay shows no trend
    assert not steady([1603.0, 1936.0]) and not steady([1603.0, 1936.0, 2128.0])
    assert steady([1603.0, 1936.0, 2128.0, 2131.0])
    assert steady([2200.0, 2100.0])  # a fall is noise, not a warm-up


def test_a_requests_steps_and_vllms_own_counts_are_read_from_its_stream(fake):
    from tuner.replay.acceptance import by_context, request_steps, requests_acceptance

    fake.mode = "spec"
    (result,), _ = replay(fake.url, "m", [Request(line=1, prompt="p", max_tokens=7)], LoadSpec())
    assert result.chunk_tokens == (1, 3, 1, 2)  # the empty final chunk carries no step
    assert result.spec_decoding["per_step_accepted"] == [2, 0, 1]
    steps = request_steps(result)
    # After the prefill's token at context 300: steps of 3, 1 and 2 tokens at 301, 304, 305.
    assert (steps.tokens, steps.contexts, steps.stream_accepted) == ((3, 1, 2), (301, 304, 305), 3)
    assert steps.server == (3, 3, 9) and steps.acceptance_length == 2.0
    total = requests_acceptance([steps])
    assert (total.source, total.stream_steps, total.server_accepted, total.server_drafted) == ("server", 3, 3, 9)
    (bucket,) = by_context([steps])
    assert {k: v for k, v in bucket.items() if k != "tokens_per_s"} == {"from": 256, "to": 512, "steps": 3, "tokens_per_step": 2.0}
    assert len(steps.seconds) == 3 and bucket["tokens_per_s"] == 6 / sum(steps.seconds)  # timed by the client
