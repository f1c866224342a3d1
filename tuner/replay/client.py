"""The streaming replay client: one asyncio loop, aiohttp, OpenAI-compatible endpoints.

TTFT is the time to the first streamed chunk that carries text; the output token count comes
from the final usage report (``stream_options.include_usage``), never from counting chunks,
because with speculation one chunk can carry several tokens. With ``n`` > 1 each chunk carries
one choice (its ``index``) and vLLM's usage report totals the tokens of all choices, so TPOT
divides by the tokens per choice, and the text digest is taken per choice, in index order
(the choices' chunks interleave differently from run to run).

aiohttp rather than httpx here (httpx serves every other request of the tuner): aiohttp parses
HTTP in C and hands over whole buffers, and the connection goes back to the pool once the
stream is read to its end. httpx's streaming fell well short of `vllm bench serve`'s client on
one core, and this client keeps up with it (benchmarks/client_overhead.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
import numpy as np

from tuner.errors import UsageError
from tuner.workload.model import Request

LoadMode = Literal["concurrency", "rate", "trace"]


@dataclass(frozen=True)
class LoadSpec:
    """How requests are sent: a closed loop of N clients, a Poisson rate, or the captured trace."""

    mode: LoadMode = "concurrency"
    concurrency: int = 1
    rate: float | None = None  # requests per second, for mode "rate"
    time_scale: float = 1.0  # multiplies captured gaps, for mode "trace" (0.5 = twice as fast)
    seed: int = 0  # Poisson arrivals are reproducible

    def __post_init__(self) -> None:
        if self.mode not in ("concurrency", "rate", "trace"):
            raise UsageError(f"--load must be concurrency, rate or trace, got {self.mode!r}")
        if self.concurrency < 1:
            raise UsageError(f"--concurrency must be >= 1, got {self.concurrency}")
        if self.mode == "rate" and not (self.rate and self.rate > 0):
            raise UsageError("--load rate needs --rate R with R > 0 requests per second")
        if self.time_scale <= 0:
            raise UsageError(f"--time-scale must be > 0, got {self.time_scale}")

    @property
    def label(self) -> str:
        if self.mode == "concurrency":
            return f"concurrency {self.concurrency}"
        if self.mode == "rate":
            return f"Poisson {self.rate:g} req/s"
        return f"trace x{self.time_scale:g}"


@dataclass(frozen=True)
class RequestResult:
    """Timings of one request, in seconds; ``sent_s`` is relative to the start of the replay."""

    request_id: str
    sent_s: float
    ok: bool
    error: str | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    output_tokens: int = 0  # of all choices together
    prompt_tokens: int | None = None
    text_digest: str | None = None  # sha256 of the generated text, to compare runs
    greedy: bool = False  # sent with temperature 0: its text must not depend on the config
    # The generated token ids of a greedy request (vLLM's ``return_token_ids``), to locate the
    # first token where a config's output leaves the baseline's.
    token_ids: tuple[int, ...] | None = None
    choices: int = 1  # the choices the stream carried (n); they are decoded side by side
    # With ``top_logprobs`` asked (the baseline's reference pass): per generated token of the
    # first choice, how far its log-probability stood above the runner-up's (None where the
    # server named one candidate only). A small margin is a numeric near-tie.
    margins: tuple[float | None, ...] | None = None
    # Tokens of each streamed chunk that carried some (the first choice; from the chunks' token
    # ids): with one chunk per engine step, the first is the prefill's token and each later one
    # is 1 + the drafts that step accepted. None where the server sent no token ids, or n > 1.
    chunk_tokens: tuple[int, ...] | None = None
    chunk_at: tuple[float, ...] | None = None  # when each of those chunks arrived, after sending
    # vLLM's own per-request acceptance (--per-request-spec-decode-metrics, vLLM >= 0.29): the
    # final usage chunk's metrics.speculative_decoding (num_spec_steps, num_accepted_draft_tokens,
    # num_draft_tokens, per_step_accepted ...). None where the server sends none.
    spec_decoding: dict[str, Any] | None = None

    @property
    def tokens_per_choice(self) -> float:
        """Exact for a replayed ``output_tokens`` (every choice generates that many); the mean
        when choices ended at different lengths."""
        return self.output_tokens / max(1, self.choices)

    @property
    def tpot_s(self) -> float | None:
        """(e2e - TTFT) / (tokens per choice - 1): the decode time per token after the first."""
        per_choice = self.tokens_per_choice
        if not self.ok or per_choice < 2 or self.ttft_s is None or self.e2e_s is None:
            return None
        return (self.e2e_s - self.ttft_s) / (per_choice - 1)


def first_different_token(expected: Sequence[int], got: Sequence[int]) -> int:
    """The index of the first token where two generations part (the shorter's length if one is
    the other's start)."""
    for i, (a, b) in enumerate(zip(expected, got)):
        if a != b:
            return i
    return min(len(expected), len(got))


# Request fields sent as the workload gives them (tools and response_format opaque).
SENT_AS_CAPTURED = ("temperature", "top_p", "top_k", "seed", "n", "stop", "presence_penalty",
                    "frequency_penalty", "logprobs", "top_logprobs", "response_format", "tools",
                    "tool_choice", "repetition_penalty", "min_p", "logit_bias", "stop_token_ids")


def request_body(request: Request, model: str, default_max_tokens: int,
                 top_logprobs: int = 0) -> tuple[str, dict[str, Any]]:
    """The endpoint path and JSON body for one request.

    A captured ``output_tokens`` is replayed as exactly that many tokens (``ignore_eos``), as
    ``vllm bench serve`` does for datasets with output lengths, so every configuration
    generates the same amount of text. ``top_logprobs``: ask a greedy request for that many
    candidates per token (never in a measured replay: it costs the server time).
    """
    body: dict[str, Any] = {"model": model, "stream": True,
                            "stream_options": {"include_usage": True}}
    if request.output_tokens is not None:
        body["max_tokens"] = request.output_tokens  # per choice, as vLLM reads max_tokens
        body["ignore_eos"] = True  # the EOS token only: stop strings still end a choice
    else:
        body["max_tokens"] = request.max_tokens or default_max_tokens
    for name in SENT_AS_CAPTURED:
        if (value := getattr(request, name)) is not None:
            body[name] = list(value) if isinstance(value, tuple) else value
    # Token ids per chunk: the greedy check compares them, and every request's chunks give its
    # acceptance per step. A few bytes per chunk; ignored by servers without it.
    body["return_token_ids"] = True
    if request.temperature == 0:
        if top_logprobs:
            # Candidates named by token id: two tokens that decode alike stay apart.
            body["return_tokens_as_token_ids"] = True
            if request.is_chat:
                body["logprobs"], body["top_logprobs"] = True, top_logprobs
            else:
                body["logprobs"] = top_logprobs
    if request.is_chat:
        body["messages"] = list(request.messages or ())
        return "/v1/chat/completions", body
    body["prompt"] = request.prompt
    return "/v1/completions", body


def _choice_text(choice: dict[str, Any]) -> str:
    """A choice's new text: completions' ``text``, chat's content or tool-call deltas."""
    if "text" in choice:
        return choice["text"] or ""
    delta = choice.get("delta") or {}
    text = delta.get("content") or ""
    for call in delta.get("tool_calls") or ():
        function = call.get("function") or {}
        text += (function.get("name") or "") + (function.get("arguments") or "")
    return text


def _top_margins(logprobs: dict[str, Any] | None) -> list[float | None]:
    """Per token of a streamed chunk, its log-probability's lead over the runner-up: from
    completions' ``top_logprobs`` (a dict per token) or chat's ``content`` (a list per token)."""
    if not logprobs:
        return []
    if "content" in logprobs:
        tops = [[c.get("logprob") for c in (t.get("top_logprobs") or ())] for t in logprobs["content"] or ()]
    else:
        tops = [list((t or {}).values()) for t in logprobs.get("top_logprobs") or ()]
    margins: list[float | None] = []
    for values in tops:
        ranked = sorted((v for v in values if v is not None), reverse=True)
        margins.append(ranked[0] - ranked[1] if len(ranked) > 1 else None)
    return margins


class _Choices:
    """Each choice's text digest and token ids, by ``index``."""

    def __init__(self) -> None:
        self.text: dict[int, Any] = {}
        self.token_ids: dict[int, list[int]] = {}
        self.margins: list[float | None] = []  # of the first choice
        self.chunk_tokens: list[int] = []  # of the first choice: tokens per chunk that carried any
        self.chunk_at: list[float] = []  # when each of those chunks arrived, seconds after sending

    def add(self, choice: dict[str, Any], at: float) -> str:
        index = choice.get("index") or 0
        if index not in self.text:
            self.text[index], self.token_ids[index] = hashlib.sha256(), []
        piece = _choice_text(choice)
        if piece:
            self.text[index].update(piece.encode())
        ids = choice.get("token_ids") or ()
        self.token_ids[index] += ids
        if index == 0:
            self.margins += _top_margins(choice.get("logprobs"))
            if ids:
                self.chunk_tokens.append(len(ids))
                self.chunk_at.append(at)
        return piece

    def digest(self) -> str:
        """One choice: the sha256 of its text (as before n was replayed); several: of their
        digests in index order."""
        if len(self.text) <= 1:
            return (next(iter(self.text.values()), None) or hashlib.sha256()).hexdigest()[:32]
        return choice_digest(h.hexdigest() for _, h in sorted(self.text.items()))

    def all_token_ids(self) -> list[int]:
        return [t for _, ids in sorted(self.token_ids.items()) for t in ids]


def choice_digest(digests: Any) -> str:
    """The digest of several choices from their own sha256 hex digests, in index order."""
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()[:32]


def text_digest(texts: Sequence[str]) -> str:
    """The digest a replay reports for a request whose choices generated ``texts`` (index order)."""
    if len(texts) == 1:
        return hashlib.sha256(texts[0].encode()).hexdigest()[:32]
    return choice_digest(hashlib.sha256(t.encode()).hexdigest() for t in texts)


async def send_request(
    session: aiohttp.ClientSession, base_url: str, model: str, request: Request,
    default_max_tokens: int, t0: float, top_logprobs: int = 0,
) -> RequestResult:
    path, body = request_body(request, model, default_max_tokens, top_logprobs)
    sent = time.perf_counter()
    ttft: float | None = None
    usage: dict[str, Any] | None = None
    spec_decoding: dict[str, Any] | None = None
    choices = _Choices()

    def failed(error: str) -> RequestResult:
        return RequestResult(request.label, sent - t0, ok=False, error=error, ttft_s=ttft)

    try:
        async with session.post(base_url + path, json=body) as response:
            if response.status != 200:
                detail = (await response.read()).decode(errors="replace")[:300]
                return failed(f"HTTP {response.status}: {detail}")
            pending = b""
            # Read to the end of the response (no break at [DONE]) so the connection is reused.
            async for data in response.content.iter_any():
                *events, pending = (pending + data).split(b"\n\n")
                for event in events:
                    for line in event.splitlines():
                        if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
                            continue
                        chunk = json.loads(line[5:])
                        for choice in chunk.get("choices") or ():
                            at = time.perf_counter() - sent
                            if choices.add(choice, at) and ttft is None:
                                ttft = at
                        if chunk.get("usage"):
                            usage = chunk["usage"]
                            spec_decoding = (chunk.get("metrics") or {}).get("speculative_decoding")
    except asyncio.TimeoutError:
        return failed("timed out waiting for the server")
    except aiohttp.ClientError as exc:
        return failed(f"{type(exc).__name__}: {exc}")
    except json.JSONDecodeError as exc:
        return failed(f"bad JSON in the stream ({exc.msg})")
    e2e = time.perf_counter() - sent
    if usage is None:
        return failed("the stream ended without a usage report")
    output_tokens = int(usage.get("completion_tokens") or 0)
    if output_tokens == 0:
        return failed("the server generated no tokens")
    return RequestResult(
        request.label, sent - t0, ok=True, ttft_s=ttft if ttft is not None else e2e, e2e_s=e2e,
        output_tokens=output_tokens, prompt_tokens=usage.get("prompt_tokens"),
        text_digest=choices.digest(), greedy=request.temperature == 0,
        token_ids=tuple(ids) if request.temperature == 0 and (ids := choices.all_token_ids()) else None,
        choices=max(1, len(choices.text)),
        margins=tuple(choices.margins) if choices.margins else None,
        chunk_tokens=tuple(choices.chunk_tokens) if choices.chunk_tokens and len(choices.text) == 1 else None,
        chunk_at=tuple(choices.chunk_at) if choices.chunk_at and len(choices.text) == 1 else None,
        spec_decoding=spec_decoding if isinstance(spec_decoding, dict) else None,
    )


def start_offsets(requests: Sequence[Request], load: LoadSpec) -> list[float]:
    """When each request is sent, in seconds from the start (open-loop modes only)."""
    if load.mode == "rate":
        rng = np.random.default_rng(load.seed)
        gaps = rng.exponential(1.0 / load.rate, size=len(requests))
        return list(np.cumsum(gaps) - gaps[0])
    if any(r.arrival_s is None for r in requests):
        raise UsageError("--load trace needs 'arrival_s' on every request of the workload; "
                         "use --load concurrency or --load rate instead")
    first = requests[0].arrival_s or 0.0
    return [((r.arrival_s or 0.0) - first) * load.time_scale for r in requests]


async def _replay(
    base_url: str, model: str, requests: Sequence[Request], load: LoadSpec,
    request_timeout_s: float, default_max_tokens: int,
    on_result: Callable[[RequestResult], None] | None, top_logprobs: int = 0,
) -> tuple[list[RequestResult], float]:
    results: list[RequestResult | None] = [None] * len(requests)
    timeout = aiohttp.ClientTimeout(total=request_timeout_s, sock_connect=30.0)
    connector = aiohttp.TCPConnector(limit=0)  # the load mode, not the pool, bounds concurrency
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as client:
        t0 = time.perf_counter()

        async def run(index: int) -> None:
            result = await send_request(client, base_url, model, requests[index],
                                        default_max_tokens, t0, top_logprobs)
            results[index] = result
            if on_result:
                on_result(result)

        if load.mode == "concurrency":
            pending = iter(range(len(requests)))

            async def worker() -> None:
                for index in pending:  # one shared iterator: each request goes to one worker
                    await run(index)

            await asyncio.gather(*(worker() for _ in range(min(load.concurrency, len(requests)))))
        else:
            tasks = []
            for index, offset in enumerate(start_offsets(requests, load)):
                await asyncio.sleep(max(0.0, t0 + offset - time.perf_counter()))
                tasks.append(asyncio.create_task(run(index)))
            await asyncio.gather(*tasks)
        duration = time.perf_counter() - t0
    return [r for r in results if r is not None], duration


def replay(
    base_url: str, model: str, requests: Sequence[Request], load: LoadSpec, *,
    request_timeout_s: float = 600.0, default_max_tokens: int = 128,
    on_result: Callable[[RequestResult], None] | None = None, top_logprobs: int = 0,
) -> tuple[list[RequestResult], float]:
    """Send ``requests`` with the given load; returns every request's result and the wall time.
    ``top_logprobs``: greedy requests also ask for that many candidates per token."""
    return asyncio.run(_replay(base_url, model, requests, load, request_timeout_s,
                               default_max_tokens, on_result, top_logprobs))
