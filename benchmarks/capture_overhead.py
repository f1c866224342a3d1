"""Latency that `tuner capture` adds, against an instant upstream.

An upstream that answers every streamed completion at once (no model: what is left is the
proxy's own cost), one `tuner capture` process in front of it, and a client that sends the same
requests straight to the upstream and through the proxy, in blocks of ABBA order so that drift
of a shared machine falls on both sides alike. The proxy runs pinned to a core of its own; the
client and the upstream share the other one(s), so the proxy's CPU time is not hidden by, or
added to, theirs.

Printed per concurrency level: TTFT (first event) and end-to-end p50/p99 for each side, and the
added latency (proxied minus direct, per percentile). Exit 1 when the added e2e misses the
targets (p50 < 1 ms, p99 < 5 ms).

  .venv/bin/python benchmarks/capture_overhead.py --requests 2000 --concurrency 1 --concurrency 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import numpy as np
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.engine.server import free_port, port_is_free  # noqa: E402

P50_TARGET_MS, P99_TARGET_MS = 1.0, 5.0


# --- the instant upstream (its own process) -----------------------------------------------

def _event(body: dict) -> bytes:
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def serve_upstream(port: int, events: int) -> None:
    """An OpenAI-style streaming endpoint that sends ``events`` one-token events, each in its
    own write as vLLM does, then the usage report when asked, without waiting for anything."""
    tokens = [_event({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
                      "choices": [{"index": 0, "text": f" t{i}", "logprobs": None,
                                   "finish_reason": None, "stop_reason": None}]})
              for i in range(events - 1)]
    tokens.append(_event({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
                          "choices": [{"index": 0, "text": " end", "logprobs": None,
                                       "finish_reason": "length", "stop_reason": None}]}))
    usage = _event({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
                    "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": events,
                                             "total_tokens": 10 + events}})

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in tokens:
            await response.write(event)
        if (body.get("stream_options") or {}).get("include_usage"):
            await response.write(usage)
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application(client_max_size=64 * 1024 ** 2)
    app.router.add_post("/v1/completions", completions)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


# --- the client -----------------------------------------------------------------------------

async def one(session: aiohttp.ClientSession, url: str, body: bytes) -> tuple[float, float]:
    """(TTFT, e2e) in seconds of one streamed request, read to its end."""
    start = time.perf_counter()
    first = None
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
        assert response.status == 200, response.status
        async for _ in response.content.iter_any():
            if first is None:
                first = time.perf_counter() - start
    return first or 0.0, time.perf_counter() - start


async def measure(urls: dict[str, str], body: bytes, requests: int, concurrency: int,
                  block: int) -> dict[str, np.ndarray]:
    """``requests`` per side at ``concurrency``, in blocks of ``block`` requests, ABBA order."""
    figures: dict[str, list[tuple[float, float]]] = {side: [] for side in urls}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        for side in urls:  # warm-up: connections, caches, the proxy's first requests
            await asyncio.gather(*(one(session, urls[side] + "/v1/completions", body) for _ in range(20)))
        blocks = max(1, requests // block)
        for number in range(blocks):
            order = list(urls) if number % 2 == 0 else list(urls)[::-1]
            for side in order:
                pending = iter(range(block))

                async def worker() -> None:
                    for _ in pending:
                        figures[side].append(await one(session, urls[side] + "/v1/completions", body))

                await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {side: np.asarray(values) * 1000 for side, values in figures.items()}


# --- the run ---------------------------------------------------------------------------------

def start_proxy(upstream: str, out: Path, core: int, extra: list[str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tuner.cli", "capture", "--upstream", upstream, "--out", str(out),
         "--listen", f"127.0.0.1:{port}", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, cwd=ROOT,
        preexec_fn=lambda: os.sched_setaffinity(0, {core}))
    deadline = time.monotonic() + 60
    while port_is_free(port):
        if process.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"tuner capture did not start: {process.stderr.read().decode()[-500:]}")
        time.sleep(0.1)
    return process, f"http://127.0.0.1:{port}"


def start_upstream(events: int, cores: set[int]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, __file__, "--serve-upstream", str(port), "--events", str(events)],
                               start_new_session=True, preexec_fn=lambda: os.sched_setaffinity(0, cores))
    while port_is_free(port):
        if process.poll() is not None:
            sys.exit("the upstream did not start")
        time.sleep(0.1)
    return process, f"http://127.0.0.1:{port}"


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="per side and concurrency level")
    parser.add_argument("--concurrency", type=int, action="append", help="repeatable (default 1)")
    parser.add_argument("--events", type=int, default=32, help="token events per response")
    parser.add_argument("--prompt-chars", type=int, default=2000)
    parser.add_argument("--block", type=int, default=100, help="requests per side before switching")
    parser.add_argument("--client-usage", action="store_true",
                        help="the client asks for the usage report itself (the proxy then strips nothing)")
    parser.add_argument("--capture-arg", action="append", default=[],
                        help="passed to tuner capture, repeatable (e.g. --capture-arg=--redact=KEY-\\w+)")
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        serve_upstream(args.serve_upstream, args.events)
        return
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        sys.exit("needs 2 CPUs: one for the proxy, one for the client and the upstream")
    proxy_core, others = cores[-1], set(cores[:-1])
    os.sched_setaffinity(0, others)
    levels = args.concurrency or [1]
    body = {"model": "m", "prompt": ("def f(x):\n    return x + 1\n" * 200)[:args.prompt_chars],
            "max_tokens": args.events, "temperature": 0.7, "n": 1, "stop": ["\n\n"], "stream": True}
    if args.client_usage:
        body["stream_options"] = {"include_usage": True}
    data = json.dumps(body).encode()

    upstream, upstream_url = start_upstream(args.events, others)
    with tempfile.TemporaryDirectory() as tmp:
        proxy, proxy_url = start_proxy(upstream_url, Path(tmp) / "captured.jsonl", proxy_core, args.capture_arg)
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                    text=True).stdout.strip()
            print(f"{platform.node()} {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
                  f"proxy on CPU {proxy_core}, client + upstream on CPU {sorted(others)}; tuner {commit}, "
                  f"Python {platform.python_version()}, aiohttp {aiohttp.__version__}")
            print(f"{args.requests} requests per side and level, {args.events} events each, prompt "
                  f"{args.prompt_chars} chars, client asks usage: {args.client_usage}; times in ms")
            print(f"{'conc':>4} {'side':>8} {'TTFT p50':>9} {'TTFT p99':>9} {'e2e p50':>8} {'e2e p99':>8}")
            missed = False
            cpu = []
            for level in levels:
                before = cpu_s(proxy.pid)
                figures = asyncio.run(measure({"direct": upstream_url, "proxied": proxy_url}, data,
                                              args.requests, level, args.block))
                cpu.append((level, (cpu_s(proxy.pid) - before) / (len(figures["proxied"]) + 20) * 1000))
                rows = {}
                for side, values in figures.items():
                    rows[side] = np.concatenate([np.percentile(values[:, 0], [50, 99]),
                                                 np.percentile(values[:, 1], [50, 99])])
                    print(f"{level:>4} {side:>8} " + " ".join(f"{v:>8.2f} " for v in rows[side]))
                added = rows["proxied"] - rows["direct"]
                print(f"{level:>4} {'added':>8} " + " ".join(f"{v:>+8.2f} " for v in added))
                missed |= not (added[2] < P50_TARGET_MS and added[3] < P99_TARGET_MS)
            print("proxy CPU per request: " + ", ".join(f"{ms:.2f} ms at concurrency {level}" for level, ms in cpu))
            print(f"target (added e2e p50 < {P50_TARGET_MS} ms, p99 < {P99_TARGET_MS} ms): "
                  f"{'missed' if missed else 'met'}")
        finally:
            stop(proxy)
            stop(upstream)
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
