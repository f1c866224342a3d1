"""`tuner capture`: a recording reverse proxy in front of an OpenAI-compatible server.

Clients talk to the proxy as they would to vLLM. Every request is forwarded unchanged, except
that a recorded streaming request asks the upstream for a final usage report
(``stream_options.include_usage``), which is where ``output_tokens`` comes from; when the client
did not ask for that report itself, the proxy drops it from the stream, so the client sees
exactly what vLLM would have sent it. Responses stream through event by event.

One workload line is written per recorded request (POST /v1/completions and
/v1/chat/completions that succeed): the fields the tuner replays, ``arrival_s`` (seconds since
the first recorded request arrived) and ``output_tokens``. Lines are written in arrival order,
because a replayable trace needs non-decreasing arrivals: a line is flushed as soon as its own
request and every request that arrived before it have finished. A crash therefore loses the
requests in flight and those that finished behind the oldest of them, nothing written before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import aiohttp
from aiohttp import web
from yarl import URL

from tuner.errors import TunerError, UsageError
from tuner.workload.loader import CONVERTED, check_fields
from tuner.workload.model import Request
from tuner.workload.writer import write_line

RECORDED_PATHS = {"/v1/completions": "completion", "/v1/chat/completions": "chat"}
# Hop-by-hop and framing headers: aiohttp sets its own for each side of the proxy.
_SKIP_REQUEST_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "keep-alive",
                         "accept-encoding"}  # identity from upstream, so the proxy can read usage
_SKIP_RESPONSE_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive",
                          "content-encoding", "date", "server"}
REDACTED = "[redacted]"
_FINISHED = re.compile(rb'"finish_reason":\s*"')  # a choice that finished (not null)
# Replayed as the client sent them (the loader checks them as it checks a workload file).
# A client labels its own traffic with this header; the label becomes the line's `type`, which
# `tuner workload split` takes over any guess. Only file-name-safe labels: split names files after them.
WORKLOAD_TYPE_HEADER = "X-Workload-Type"
_TYPE_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_PASSED = ("temperature", "top_p", "top_k", "seed", "n", "stop", "presence_penalty", "frequency_penalty",
           "logprobs", "top_logprobs", "response_format", "tools", "tool_choice", "repetition_penalty",
           "min_p", "logit_bias", "stop_token_ids")
# What a chat turn keeps besides role and content: an assistant's tool calls (its content may then
# be null) and the id a tool's answer refers to.
_MESSAGE_EXTRAS = ("tool_calls", "tool_call_id", "name")


@dataclass(frozen=True)
class CaptureSettings:
    upstream: str  # e.g. http://127.0.0.1:8000
    out: Path
    host: str = "127.0.0.1"
    port: int = 8100
    sample: float = 1.0  # fraction of eligible requests recorded
    max_requests: int | None = None  # stop after recording this many
    duration_s: float | None = None  # stop after this many seconds
    redact: tuple[re.Pattern[str], ...] = ()
    workload_type: str | None = None  # written as each line's `type`
    seed: int = 0  # of the sampling draw

    def __post_init__(self) -> None:
        if not 0 < self.sample <= 1:
            raise UsageError(f"--sample must be a fraction in (0, 1], got {self.sample}")
        if self.max_requests is not None and self.max_requests < 1:
            raise UsageError(f"--max-requests must be >= 1, got {self.max_requests}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise UsageError(f"--duration must be > 0 seconds, got {self.duration_s}")
        if not re.match(r"^https?://[^/]+", self.upstream):
            raise UsageError(f"--upstream must be an http(s) URL like http://127.0.0.1:8000, "
                             f"got {self.upstream!r}")


@dataclass
class CaptureSummary:
    recorded: int = 0
    proxied: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count
    stopped_by: str = "interrupt"

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def parse_listen(value: str) -> tuple[str, int]:
    """HOST:PORT (or :PORT, or PORT) -> (host, port)."""
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--listen must be HOST:PORT, like 127.0.0.1:8100, got {value!r}")
    return host or "127.0.0.1", int(port)


def compile_redactions(patterns: list[str]) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise UsageError(f"--redact {pattern!r} is not a valid regular expression ({exc})") from None
    return tuple(compiled)


def _message_text(content: Any) -> str | None:
    """Chat content as one string: a string, or a list of text parts (other parts: None)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "\n".join(str(p.get("text", "")) for p in content)
    return None


def recordable(body: dict[str, Any], kind: str) -> tuple[dict[str, Any] | None, str | None]:
    """The replayable fields of a request body, or (None, why it cannot be replayed)."""
    fields: dict[str, Any] = {}
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return None, "chat request without messages"
        fields["messages"] = []
        for message in messages:
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                return None, "chat message with non-text content"
            text = _message_text(message.get("content"))
            if text is None and not (message.get("content") is None and message.get("tool_calls")):
                return None, "chat message with non-text content"
            fields["messages"].append({"role": message["role"], "content": text,
                                       **{k: message[k] for k in _MESSAGE_EXTRAS if message.get(k) is not None}})
    else:
        if not isinstance(body.get("prompt"), str) or not body["prompt"]:
            return None, "completion prompt that is not one string (token ids or a batch)"
        fields["prompt"] = body["prompt"]
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
    if isinstance(max_tokens, int) and max_tokens > 0:
        fields["max_tokens"] = max_tokens
    fields.update((name, body[name]) for name in _PASSED if body.get(name) is not None)
    if problem := check_fields(fields):
        return None, f"a field the workload format refuses ({problem})"
    return fields, None


class Recorder:
    """Decides which requests are recorded and writes their lines in arrival order."""

    def __init__(self, settings: CaptureSettings, out: IO[str], summary: CaptureSummary,
                 on_record: Callable[[CaptureSummary], None] | None = None):
        self.settings = settings
        self.out = out
        self.summary = summary
        self.on_record = on_record
        self.rng = random.Random(settings.seed)
        self.started = time.monotonic()
        self.first_arrival: float | None = None
        self.next_seq = 0  # arrival number handed to the next recorded request
        self.next_to_write = 0
        self.done: dict[int, Request | None] = {}  # finished, waiting for earlier arrivals
        self.accepting = True
        self.reported = 0.0  # when on_record was last called
        self.idle = asyncio.Event()  # set when no recorded request is in flight
        self.idle.set()
        self.stop = asyncio.Event()

    def admit(self) -> tuple[int, float] | None:
        """A sequence number and arrival time when this request is to be recorded, else None."""
        if not self.accepting:
            return None
        if self.settings.sample < 1 and self.rng.random() >= self.settings.sample:
            self.summary.skip("not sampled")
            return None
        now = time.monotonic()
        if self.first_arrival is None:
            self.first_arrival = now
        seq = self.next_seq
        self.next_seq += 1
        self.idle.clear()
        if self.settings.max_requests is not None and self.next_seq >= self.settings.max_requests:
            self.close("--max-requests reached")
        return seq, round(now - self.first_arrival, 3)

    def close(self, reason: str) -> None:
        """Record nothing more; the proxy stops once the recorded requests in flight are written."""
        if self.accepting:
            self.accepting = False
            self.summary.stopped_by = reason
            self.stop.set()

    def finish(self, seq: int, request: Request | None, skipped: str | None = None) -> None:
        """Hand in a finished request (None when it is not to be written, with the reason)."""
        if skipped:
            self.summary.skip(skipped)
        self.done[seq] = request
        while self.next_to_write in self.done:
            ready = self.done.pop(self.next_to_write)
            self.next_to_write += 1
            if ready is not None:
                write_line(self.out, ready)
                self.summary.recorded += 1
                # At most 5 progress updates a second: the CLI's status line costs more to
                # redraw than the line costs to write.
                if self.on_record and (now := time.monotonic()) - self.reported >= 0.2:
                    self.reported = now
                    self.on_record(self.summary)
        if self.next_to_write == self.next_seq:
            self.idle.set()

    def redact(self, text: str) -> str:
        for pattern in self.settings.redact:
            text = pattern.sub(REDACTED, text)
        return text

    def to_request(self, seq: int, arrival_s: float, fields: dict[str, Any],
                   output_tokens: int | None) -> Request:
        messages = fields.get("messages")
        if messages is not None:
            messages = tuple({**m, "content": None if m["content"] is None else self.redact(m["content"])}
                             for m in messages)
        prompt = self.redact(fields["prompt"]) if "prompt" in fields else None
        passed = {name: CONVERTED[name](fields[name]) if name in CONVERTED and name in fields
                  else fields.get(name) for name in _PASSED}  # as the loader stores them
        return Request(line=seq + 1, prompt=prompt, messages=messages,
                       max_tokens=fields.get("max_tokens"), **passed, arrival_s=arrival_s,
                       id=f"capture-{seq + 1:05d}", output_tokens=output_tokens,
                       type=fields.get("type") or self.settings.workload_type)


def _sse_chunk(event: bytes) -> dict[str, Any] | None:
    """The JSON object of one server-sent event, or None ([DONE], comments, not JSON)."""
    for line in event.splitlines():
        if line.startswith(b"data:") and line[5:].strip() not in (b"", b"[DONE]"):
            try:
                chunk = json.loads(line[5:])
            except json.JSONDecodeError:
                return None
            return chunk if isinstance(chunk, dict) else None
    return None


class UsageReader:
    """Reads the usage report out of a stream and, when the client did not ask for it, removes
    it. vLLM then puts the server's ``system_fingerprint`` on each event that finishes a choice
    instead of on the usage event: the client sees what vLLM would have sent. The fingerprint is
    the server's, so once one usage event showed it (``seen``, shared by the proxy's requests),
    such events get it at once; before that they are held until the usage event comes (it
    follows at once), or until another choice's event comes (n > 1), which keeps their order."""

    def __init__(self, client_wants_usage: bool, seen: dict[str, Any] | None = None):
        self.client_wants_usage = client_wants_usage
        self.usage: dict[str, Any] | None = None
        self.held: list[bytes] = []
        self.seen = seen if seen is not None else {}  # "fingerprint": the upstream's last one

    def feed(self, event: bytes) -> list[bytes]:
        """Events to forward now, each ending with a blank line."""
        # Most events carry one token and neither field: skip parsing them (the proxy shares
        # the host's CPUs with vLLM).
        if b'"usage"' not in event and not _FINISHED.search(event):
            return [*self._release(None), event + b"\n\n"]
        chunk = _sse_chunk(event)
        if chunk is not None and chunk.get("usage"):
            self.usage = chunk["usage"]
            if "system_fingerprint" in chunk:
                self.seen["fingerprint"] = chunk["system_fingerprint"]
        if self.client_wants_usage:
            return [event + b"\n\n"]
        if chunk is not None and chunk.get("usage") and not chunk.get("choices"):
            fingerprint = chunk.get("system_fingerprint")
            return self._release(fingerprint)
        if chunk is not None and any(c.get("finish_reason") for c in chunk.get("choices") or ()):
            self.held.append(event)
            if "fingerprint" in self.seen:
                return self._release(self.seen["fingerprint"])
            return []
        return [*self._release(None), event + b"\n\n"]

    def flush(self) -> list[bytes]:
        return self._release(None)

    def _release(self, fingerprint: Any) -> list[bytes]:
        out = []
        for event in self.held:
            if fingerprint is not None and (chunk := _sse_chunk(event)) is not None:
                chunk["system_fingerprint"] = fingerprint
                event = b"data: " + json.dumps(chunk, ensure_ascii=False, separators=(",", ":")).encode()
            out.append(event + b"\n\n")
        self.held = []
        return out


class CaptureProxy:
    def __init__(self, settings: CaptureSettings, recorder: Recorder):
        self.settings = settings
        self.recorder = recorder
        self.upstream = settings.upstream.rstrip("/")
        self.session: aiohttp.ClientSession | None = None
        self.urls: dict[str, URL] = {}  # path?query -> upstream URL, parsed once
        self.seen: dict[str, Any] = {}  # what UsageReader learnt of the upstream

    def url(self, path_qs: str) -> URL:
        url = self.urls.get(path_qs)
        if url is None:
            url = URL(self.upstream + path_qs, encoded=True)  # the client's path, already quoted
            if len(self.urls) < 1024:  # query strings could make the cache grow without end
                self.urls[path_qs] = url
        return url

    async def handle(self, request: web.Request) -> web.StreamResponse:
        assert self.session is not None
        body = await request.read()
        self.recorder.summary.proxied += 1
        kind = RECORDED_PATHS.get(request.path) if request.method == "POST" else None
        parsed = _json_object(body) if kind else None
        admitted = self.recorder.admit() if parsed is not None else None
        fields, why_not = recordable(parsed, kind) if admitted and parsed is not None and kind else (None, None)
        label = request.headers.get(WORKLOAD_TYPE_HEADER, "").strip()
        if fields is not None and _TYPE_LABEL.match(label):
            fields["type"] = label
        if admitted and fields is None:
            self.recorder.finish(admitted[0], None, why_not)
            admitted = None
        streaming = bool(parsed and parsed.get("stream"))
        client_wants_usage = bool(parsed and (parsed.get("stream_options") or {}).get("include_usage"))
        if admitted and streaming and not client_wants_usage:
            body = _asking_usage(body, parsed)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SKIP_REQUEST_HEADERS}
        usage: dict[str, Any] | None = None
        # complete: the whole response came from upstream and was handed to the client. The line
        # is written before the response ends, so a client that saw the end finds it in the file.
        status, complete = 0, False
        try:
            async with self.session.request(request.method, self.url(request.path_qs),
                                            data=body, headers=headers) as upstream:
                status = upstream.status
                out_headers = {k: v for k, v in upstream.headers.items()
                               if k.lower() not in _SKIP_RESPONSE_HEADERS}
                if not (streaming and upstream.status == 200):
                    data = await upstream.read()
                    if admitted and upstream.status == 200:
                        usage = (_json_object(data) or {}).get("usage")
                    complete = True
                    if admitted:
                        admitted = self._finish(admitted, fields or {}, status, usage, complete)
                    return web.Response(status=upstream.status, body=data, headers=out_headers)
                # No tcp_nodelay() here: asyncio and uvloop set TCP_NODELAY on every connection.
                response = web.StreamResponse(status=upstream.status, headers=out_headers)
                await response.prepare(request)
                pending = b""
                reader = UsageReader(client_wants_usage, self.seen)
                async for data in upstream.content.iter_any():
                    if not admitted:  # nothing to read: pass bytes straight on
                        await response.write(data)
                        continue
                    *events, pending = (pending + data).split(b"\n\n")
                    forward = [out for event in events for out in reader.feed(event)]
                    if forward:
                        await response.write(b"".join(forward))
                usage = reader.usage
                if tail := b"".join(reader.flush()) + pending:
                    await response.write(tail)
                complete = True
                if admitted:
                    admitted = self._finish(admitted, fields or {}, status, usage, complete)
                await response.write_eof()
                return response
        except aiohttp.ClientError as exc:
            return web.Response(status=502, text=f"tuner capture: upstream {self.upstream} failed: {exc}\n")
        finally:
            if admitted:  # not finished above: the response broke off
                self._finish(admitted, fields or {}, status, usage, complete)

    def _finish(self, admitted: tuple[int, float], fields: dict[str, Any], status: int,
                usage: dict[str, Any] | None, complete: bool) -> None:
        """Hand the request to the recorder, written or counted as skipped. Returns None, the
        caller's new ``admitted``, so that a request is finished once."""
        seq, arrival_s = admitted
        if status != 200:
            self.recorder.finish(seq, None, f"HTTP {status or 'error'} from upstream")
        elif not complete:
            self.recorder.finish(seq, None, "response cut off (the client went away, the upstream "
                                            "failed or the capture stopped)")
        else:
            # vLLM's usage counts the tokens of all n choices; a workload line holds one choice's.
            tokens, n = (usage or {}).get("completion_tokens"), fields.get("n") or 1
            output_tokens = max(1, (tokens + n // 2) // n) if isinstance(tokens, int) and tokens > 0 else None
            self.recorder.finish(seq, self.recorder.to_request(seq, arrival_s, fields, output_tokens))
        return None


def _asking_usage(body: bytes, parsed: dict[str, Any]) -> bytes:
    """The body with ``stream_options.include_usage`` on. Appended to the bytes as they came
    when the client sent no stream_options (the usual case): cheaper than encoding the whole
    body again, which a long prompt makes costly."""
    head = body.rstrip()
    if "stream_options" not in parsed and head.endswith(b"}") and parsed:
        return head[:-1] + b', "stream_options": {"include_usage": true}}'
    options = {**(parsed.get("stream_options") or {}), "include_usage": True}
    return json.dumps({**parsed, "stream_options": options}).encode()


def _json_object(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


async def _serve(settings: CaptureSettings, out: IO[str], summary: CaptureSummary,
                 on_ready: Callable[[], None] | None,
                 on_record: Callable[[CaptureSummary], None] | None) -> None:
    recorder = Recorder(settings, out, summary, on_record)
    proxy = CaptureProxy(settings, recorder)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
    async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False,
                                     connector=aiohttp.TCPConnector(limit=0)) as session:
        proxy.session = session
        app = web.Application(client_max_size=64 * 1024 ** 2)
        app.router.add_route("*", "/{tail:.*}", proxy.handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            try:
                await web.TCPSite(runner, settings.host, settings.port).start()
            except OSError as exc:
                raise UsageError(f"cannot listen on {settings.host}:{settings.port} ({exc.strerror}); "
                                 f"pass a free --listen HOST:PORT") from None
            if on_ready:
                on_ready()
            try:
                await asyncio.wait_for(recorder.stop.wait(), settings.duration_s)
            except asyncio.TimeoutError:
                recorder.close("--duration reached")
            await recorder.idle.wait()  # the recorded requests still in flight finish and are written
        finally:
            await runner.cleanup()


def _event_loop_run(main: Any) -> None:
    """uvloop where it is installed (vLLM's own dependency): it cut the proxy's CPU per request
    (docs/lab/capture.md); asyncio's loop otherwise."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


def run_capture(settings: CaptureSettings, on_ready: Callable[[], None] | None = None,
                on_record: Callable[[CaptureSummary], None] | None = None) -> CaptureSummary:
    """Proxy and record until a cap is reached or the user interrupts (Ctrl-C, SIGTERM).

    Appending is not supported: the output file is started afresh, as its arrival times are
    relative to this capture's first request.
    """
    summary = CaptureSummary()
    try:
        settings.out.parent.mkdir(parents=True, exist_ok=True)
        out = settings.out.open("w", encoding="utf-8")
    except OSError as exc:
        raise TunerError(f"cannot write {settings.out} ({exc.strerror}); pass another --out") from None
    with out, contextlib.suppress(KeyboardInterrupt):
        _event_loop_run(_serve(settings, out, summary, on_ready, on_record))
    return summary
