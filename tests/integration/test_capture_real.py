"""`tuner capture` in front of the REAL vLLM server (CPU build, the project's tiny target model).

One server serves every test of this module; each test starts its own `tuner capture` process,
as a user would, and stops it by its process group.
"""

from __future__ import annotations

import json
import os
import signal
import string
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tuner.engine import ServerOptions
from tuner.engine.server import VllmServer, free_port, port_is_free
from tuner.replay import LoadSpec
from tuner.replay.client import first_different_token, replay, text_digest
from tuner.decide.output_check import NEAR_TIE_MARGIN
from tuner.workload import load_workload

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(tiny_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    options = ServerOptions(server_args=["--enforce-eager", "--max-model-len=1024"],
                            log_dir=tmp_path_factory.mktemp("logs"),
                            env={"VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")})
    with VllmServer(str(tiny_models / "target"), None, options) as running:
        yield running


class CaptureProcess:
    """`tuner capture` as a subprocess in its own process group."""

    def __init__(self, upstream: str, out: Path, *args: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tuner.cli", "capture", "--upstream", upstream, "--out", str(out),
             "--listen", f"127.0.0.1:{self.port}", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        deadline = time.monotonic() + 60
        while port_is_free(self.port):
            assert self.process.poll() is None, self.process.communicate()[1]
            assert time.monotonic() < deadline, "tuner capture did not start listening"
            time.sleep(0.2)

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, str]:
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)
        _, stderr = self.process.communicate(timeout=30)
        return self.process.returncode, stderr

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


@pytest.fixture
def start_capture() -> Iterator:
    started: list[CaptureProcess] = []

    def start(upstream: str, out: Path, *args: str) -> CaptureProcess:
        started.append(CaptureProcess(upstream, out, *args))
        return started[-1]

    yield start
    for capture in started:  # also when the test failed
        capture.kill()


def sent_text(request) -> object:
    return request.prompt if request.prompt is not None else list(request.messages)


def test_a_replay_through_capture_is_recorded_and_replays_the_same(server: VllmServer, tmp_path: Path,
                                                                   start_capture) -> None:
    code = load_workload(ROOT / "workloads" / "code.jsonl").requests[:10]
    chat = load_workload(ROOT / "workloads" / "chat.jsonl").requests[:10]
    sent = [*code, *chat]
    out = tmp_path / "captured.jsonl"
    capture = start_capture(server.base_url, out, "--type", "mixed")

    results, _ = replay(capture.url, server.model, sent, LoadSpec(concurrency=3))
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    rc, stderr = capture.stop()
    assert rc == 0, stderr
    assert f"{len(sent)} requests recorded" in stderr

    captured = load_workload(out)
    assert len(captured) == len(sent)
    # Concurrency 3 may reorder arrivals slightly; the set of prompts and their lengths is what counts.
    by_text = {json.dumps(sent_text(r)): r for r in sent}
    assert sorted(by_text) == sorted(json.dumps(sent_text(r)) for r in captured.requests)
    for request in captured.requests:
        original = by_text[json.dumps(sent_text(request))]
        assert request.output_tokens == original.output_tokens  # from vLLM's usage report
        assert request.temperature == original.temperature and request.type == "mixed"
    arrivals = [r.arrival_s for r in captured.requests]
    assert arrivals[0] == 0.0 and arrivals == sorted(arrivals)

    # Replaying the captured file reproduces the request count, the prompts and the lengths.
    again, _ = replay(server.base_url, server.model, captured.requests, LoadSpec(concurrency=3), top_logprobs=2)
    assert len(again) == len(sent) and all(r.ok for r in again)
    for request, result in zip(captured.requests, again):
        assert result.output_tokens == request.output_tokens
    # Greedy requests generate the same text from the captured file as from the original, up to
    # a numeric near-tie: the tiny target has exact ties between its top two tokens, which the
    # batches of concurrency 3 (never the same twice) break either way (seen in CI).
    first = {r.request_id: r for r in results}
    same = 0
    for request, result in zip(captured.requests, again):
        original = first[by_text[json.dumps(sent_text(request))].label]
        if result.text_digest == original.text_digest:
            same += 1
            continue
        token = first_different_token(original.token_ids, result.token_ids)
        assert result.margins[token] is not None and result.margins[token] < NEAR_TIE_MARGIN, \
            (request.label, token, result.margins[max(0, token - 2):token + 2])
    assert same >= len(sent) // 2, same  # ties are the exception, not the rule


def _stream(url: str, path: str, body: dict) -> list[str]:
    with httpx.stream("POST", url + path, json=body, timeout=120) as response:
        assert response.status_code == 200
        return [line for line in response.iter_lines() if line]


def _events(lines: list[str]) -> list[dict]:
    """The stream's events without what differs between two requests (id, created time)."""
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    return [{k: v for k, v in event.items() if k not in ("id", "created")} for event in events]


def _pieces(events: list[dict]) -> list[str]:
    """Each event's text: where vLLM cut the stream."""
    return ["".join(c.get("text") or (c.get("delta") or {}).get("content") or "" for c in e["choices"])
            for e in events]


def _merged(events: list[dict]) -> tuple:
    """Text, finish reasons, usage and fingerprint of a stream, whatever its event boundaries."""
    text = "".join(_pieces(events))
    finish = [c["finish_reason"] for e in events for c in e["choices"] if c.get("finish_reason")]
    return (text, finish, [e.get("usage") for e in events if e.get("usage")],
            [e.get("system_fingerprint") for e in events if "system_fingerprint" in e])


@pytest.mark.parametrize("with_usage", [False, True])
def test_streamed_responses_through_the_proxy_are_identical(server: VllmServer, tmp_path: Path,
                                                            start_capture, with_usage: bool) -> None:
    capture = start_capture(server.base_url, tmp_path / "s.jsonl")
    bodies = [
        ("/v1/completions", {"model": server.model, "prompt": "def add(a, b):\n    return", "max_tokens": 24,
                             "temperature": 0, "stream": True}),
        ("/v1/chat/completions", {"model": server.model, "max_tokens": 24, "temperature": 0, "stream": True,
                                  "messages": [{"role": "user", "content": "Name three colours."}]}),
    ]
    for path, body in bodies:
        if with_usage:
            body = {**body, "stream_options": {"include_usage": True}}
        direct, proxied = _events(_stream(server.base_url, path, body)), _events(_stream(capture.url, path, body))
        assert len(direct) > 3
        # vLLM merges tokens into one event when its output queue backs up (a loaded host), so
        # two streams of one greedy request may split the text differently: where they split it
        # alike, every event must be identical; otherwise the text, finish, usage and fingerprint.
        if _pieces(proxied) == _pieces(direct):
            assert proxied == direct
        assert _merged(proxied) == _merged(direct)
        assert any("usage" in e for e in proxied) == with_usage  # usage only when the client asked
    # Non-streaming and non-recorded endpoints pass through too; errors keep their status.
    plain = {"model": server.model, "prompt": "x = ", "max_tokens": 8, "temperature": 0}
    direct = httpx.post(server.base_url + "/v1/completions", json=plain, timeout=60).json()
    proxied = httpx.post(capture.url + "/v1/completions", json=plain, timeout=60).json()
    assert proxied["choices"] == direct["choices"] and proxied["usage"] == direct["usage"]
    assert httpx.get(capture.url + "/v1/models").json()["data"][0]["id"] == server.model
    wrong = httpx.post(capture.url + "/v1/completions", json={**plain, "model": "no-such-model"})
    assert wrong.status_code == httpx.post(server.base_url + "/v1/completions",
                                           json={**plain, "model": "no-such-model"}).status_code == 404
    rc, stderr = capture.stop()
    assert rc == 0 and "1 HTTP 404 from upstream" in stderr
    assert len(load_workload(tmp_path / "s.jsonl")) == 3  # the two streams and the plain request


def test_a_killed_capture_keeps_every_finished_request(server: VllmServer, tmp_path: Path, start_capture) -> None:
    out = tmp_path / "k.jsonl"
    capture = start_capture(server.base_url, out, "--max-requests", "100")
    requests = load_workload(ROOT / "workloads" / "code.jsonl").requests[:4]
    results, _ = replay(capture.url, server.model, requests, LoadSpec(concurrency=1))
    assert all(r.ok for r in results)
    capture.kill()  # SIGKILL: no chance to clean up
    assert [r.prompt for r in load_workload(out).requests] == [r.prompt for r in requests]


def _choices(lines: list[str]) -> tuple[list[str], list[dict], list[dict]]:
    """Per-index text, the events that finish a choice, and the usage events of an n > 1 stream."""
    events = _events(lines)
    texts: dict[int, str] = {}
    for event in events:
        for choice in event["choices"]:
            texts[choice["index"]] = texts.get(choice["index"], "") + (choice.get("text") or "")
    finishing = [e for e in events if any(c.get("finish_reason") for c in e["choices"])]
    return [texts[i] for i in sorted(texts)], finishing, [e for e in events if e.get("usage")]


def test_n_choices_with_a_stop_string_are_captured_and_replayed_alike(server: VllmServer, tmp_path: Path,
                                                                      start_capture) -> None:
    # vLLM refuses n > 1 with temperature 0; with top_k 1 (vLLM's extension, captured too) each
    # choice draws the likeliest token. Near-tied tokens can still flip with the batch (the CPU
    # build is not batch-invariant), so the stop string is taken from the start of the output.
    sampled = {"model": server.model, "prompt": "def add(a, b):\n    return", "max_tokens": 24,
               "temperature": 0.8, "top_k": 1, "n": 2}
    plain = [c["text"] for c in httpx.post(server.base_url + "/v1/completions", json=sampled,
                                           timeout=60).json()["choices"]]
    plain = plain[0]
    # The stop string: the first punctuation after the start of what the model writes here, so
    # that it ends both choices early, at one length (found in the output, not assumed).
    stop = next(c for c in plain[2:] if c in string.punctuation)
    body = {**sampled, "stop": [stop], "stream": True}
    capture = start_capture(server.base_url, tmp_path / "n.jsonl")
    asked = {**body, "stream_options": {"include_usage": True}}
    texts, finishing, usage = _choices(_stream(capture.url, "/v1/completions", asked))
    assert texts[0] == texts[1] == plain[:plain.find(stop)]  # both choices ended at the stop string
    assert [c["finish_reason"] for e in finishing for c in e["choices"]] == ["stop", "stop"]
    (usage,) = [e["usage"] for e in usage]
    total = usage["completion_tokens"]  # vLLM's usage totals both choices
    assert total % 2 == 0 and total < 2 * 24
    # A client that did not ask for usage gets none, and each choice's end as vLLM sends it.
    proxied = _choices(_stream(capture.url, "/v1/completions", body))
    direct = _choices(_stream(server.base_url, "/v1/completions", body))
    assert len(proxied[0]) == len(direct[0]) == 2 and not proxied[2] and not direct[2]
    assert [sorted(e) for e in proxied[1]] == [sorted(e) for e in direct[1]]  # system_fingerprint alike
    rc, stderr = capture.stop()
    assert rc == 0, stderr

    captured = load_workload(tmp_path / "n.jsonl").requests
    assert len(captured) == 2
    for request in captured:
        assert (request.n, request.stop, request.max_tokens) == (2, (stop,), 24)
        assert request.output_tokens == total // 2  # per choice: what max_tokens means on replay
    again, _ = replay(server.base_url, server.model, captured, LoadSpec(concurrency=1))
    assert all(r.ok for r in again), [r.error for r in again]
    for result in again:
        # The replay generated what the original did: two choices, the same tokens and text (a
        # replay without the stop string would have generated it within its output_tokens).
        assert (result.choices, result.output_tokens) == (2, total)
        assert result.text_digest == text_digest(texts)
