"""Client overhead: how fast can a streaming client go when the server costs nothing?

A measurement of speculative decoding is only valid if the client that sends the requests is
never the bottleneck. This benchmark puts the tuner's replay client (``tuner.replay.replay``)
and vLLM's own client (``vllm bench serve``) in front of a test server that answers instantly,
and reports the requests/s and output tokens/s each client sustains on one CPU core.

- The test server is a small asyncio HTTP/1.1 server (keep-alive, chunked transfer encoding) in
  its own process pinned to core 1. ``POST /v1/completions`` with ``stream: true`` streams
  ``max_tokens`` SSE chunks ``data: {"choices":[{"text":"x","index":0}]}``, then a usage chunk
  and ``data: [DONE]``. It also answers ``GET /v1/models``; ``/tokenize`` and ``/metrics``
  (probed by ``vllm bench serve``) get a 404, which vLLM's client treats as "not available".
  ``--server-writes per-token`` (default) writes each SSE chunk separately and yields to the
  event loop in between, like a real server's decode steps; ``burst`` writes a whole response
  at once.
- Each client run is a fresh child process pinned to core 0. The two clients alternate
  (ours, vLLM's, ours, vLLM's, ...); each reports its own duration and throughput.
- CPU seconds divided by the client's measured duration show how busy each core was: the
  server well below 100 % means the server was not what limited the run; the client near 100 %
  means the client was (as it should be here), and clearly below 100 % means something else
  took core 0 from it (the machine was not quiet) or it waited on the server.

Run from the repository root with the project's venv::

    .venv/bin/python benchmarks/client_overhead.py --requests 400 --output-len 64 --concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MODEL_NAME = "target"
SERVER_CORE = 1
CLIENT_CORE = 0

# --------------------------------------------------------------------------------------------
# The test server
# --------------------------------------------------------------------------------------------


def _http_chunk(payload: bytes) -> bytes:
    """One chunk of HTTP/1.1 chunked transfer encoding."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


STREAM_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
               b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n")
TOKEN_CHUNK = _http_chunk(b'data: {"choices":[{"text":"x","index":0}]}\n\n')
DONE_CHUNK = _http_chunk(b"data: [DONE]\n\n")
LAST_CHUNK = b"0\r\n\r\n"


def _usage_chunk(prompt_tokens: int, completion_tokens: int) -> bytes:
    usage = {"choices": [], "usage": {"prompt_tokens": prompt_tokens,
                                      "completion_tokens": completion_tokens,
                                      "total_tokens": prompt_tokens + completion_tokens}}
    return _http_chunk(b"data: " + json.dumps(usage).encode() + b"\n\n")


def _json_response(status: str, payload: Any) -> bytes:
    body = json.dumps(payload).encode()
    return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


MODELS_RESPONSE = _json_response("200 OK", {"object": "list", "data": [
    {"id": MODEL_NAME, "object": "model", "root": MODEL_NAME, "owned_by": "benchmark"}]})
NOT_FOUND = _json_response("404 Not Found", {"error": "not found"})


class InstantSSEServer(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; requests are parsed from the byte stream."""

    def __init__(self, per_token: bool) -> None:
        self.per_token = per_token
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (request := self._next_request()) is not None:
            self._dispatch(*request)

    def _next_request(self) -> tuple[str, str, bytes] | None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        request_line, *header_lines = self.buffer[:end].decode("latin-1").split("\r\n")
        length = 0
        for line in header_lines:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if len(self.buffer) < end + 4 + length:
            return None
        body = bytes(self.buffer[end + 4:end + 4 + length])
        del self.buffer[:end + 4 + length]
        method, path, _ = request_line.split(" ", 2)
        return method, path.split("?", 1)[0], body

    def _dispatch(self, method: str, path: str, body: bytes) -> None:
        assert self.transport is not None
        if method == "GET" and path == "/v1/models":
            self.transport.write(MODELS_RESPONSE)
        elif method == "POST" and path == "/v1/completions":
            request = json.loads(body)
            max_tokens = int(request.get("max_tokens") or 16)
            prompt_tokens = len(str(request.get("prompt", "")).split())
            if self.per_token:
                asyncio.get_running_loop().create_task(self._stream(max_tokens, prompt_tokens))
            else:
                self.transport.write(STREAM_HEAD + TOKEN_CHUNK * max_tokens
                                     + _usage_chunk(prompt_tokens, max_tokens)
                                     + DONE_CHUNK + LAST_CHUNK)
        else:
            self.transport.write(NOT_FOUND)

    async def _stream(self, max_tokens: int, prompt_tokens: int) -> None:
        """One write per SSE chunk, yielding to the loop in between (interleaved streams)."""
        transport = self.transport
        assert transport is not None
        transport.write(STREAM_HEAD)
        for _ in range(max_tokens):
            if transport.is_closing():
                return
            transport.write(TOKEN_CHUNK)
            await asyncio.sleep(0)
        transport.write(_usage_chunk(prompt_tokens, max_tokens) + DONE_CHUNK + LAST_CHUNK)


def _serve(per_token: bool, port_queue: mp.Queue) -> None:
    """Server process body: pin to the server core, listen on a free loopback port, forever."""
    os.sched_setaffinity(0, {SERVER_CORE})
    try:
        import uvloop  # the server should be as cheap as possible; the clients keep their loop
        uvloop.install()
    except ImportError:
        pass

    async def run() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: InstantSSEServer(per_token), "127.0.0.1", 0,
                                          backlog=1024)
        port_queue.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(run())


def start_server(per_token: bool) -> tuple[mp.Process, str]:
    """Start the test server process; returns it and its base URL once it answers."""
    context = mp.get_context("spawn")
    port_queue = context.Queue()
    process = context.Process(target=_serve, args=(per_token, port_queue), daemon=True)
    process.start()
    base_url = f"http://127.0.0.1:{port_queue.get(timeout=30)}"
    with urllib.request.urlopen(base_url + "/v1/models", timeout=10) as response:
        assert json.load(response)["data"][0]["id"] == MODEL_NAME
    return process, base_url


# --------------------------------------------------------------------------------------------
# The clients under test (each runs in a child process pinned to the client core)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    requests: int
    input_len: int
    output_len: int
    concurrency: int


@dataclass(frozen=True)
class ClientRun:
    """What one client reported about one run, plus the server's CPU seconds during it."""

    client: str
    duration_s: float
    completed: int
    failed: int
    output_tokens: int
    requests_per_s: float
    tokens_per_s: float
    client_cpu_s: float = 0.0  # the client process's CPU seconds over the timed window
    server_cpu_s: float = 0.0

    @property
    def client_busy(self) -> float:
        """Share of core 0 the client used; near 100 % means the client itself was the limit."""
        return self.client_cpu_s / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def server_busy(self) -> float:
        return self.server_cpu_s / self.duration_s if self.duration_s > 0 else 0.0


def run_ours(base_url: str, workload: Workload, profile_path: str | None) -> dict[str, Any]:
    """The tuner's replay client on synthetic completions requests, timed by its own duration."""
    sys.path.insert(0, str(REPO))
    from tuner.replay import LoadSpec, replay, summarize
    from tuner.workload import Request

    prompt = " ".join(["token"] * workload.input_len)
    requests = [Request(line=i + 1, prompt=f"{i} {prompt}", output_tokens=workload.output_len)
                for i in range(workload.requests)]
    load = LoadSpec("concurrency", workload.concurrency)
    cpu_before = time.process_time()
    if profile_path:
        import cProfile
        profiler = cProfile.Profile()
        results, duration = profiler.runcall(replay, base_url, MODEL_NAME, requests, load)
        profiler.dump_stats(profile_path)
    else:
        results, duration = replay(base_url, MODEL_NAME, requests, load)
    client_cpu = time.process_time() - cpu_before
    summary = summarize(results, duration)
    return {"duration_s": duration, "completed": summary.completed, "failed": summary.failed,
            "output_tokens": summary.output_tokens, "requests_per_s": summary.requests_per_s,
            "tokens_per_s": summary.output_tokens_per_s, "client_cpu_s": client_cpu}


def vllm_bench_argv(base_url: str, workload: Workload) -> list[str]:
    """The ``vllm bench serve`` flags for the same workload (random prompts, fixed lengths)."""
    return [
        "--backend", "openai", "--base-url", base_url, "--endpoint", "/v1/completions",
        "--model", MODEL_NAME, "--tokenizer", str(REPO / ".models" / "target"),
        "--dataset-name", "random", "--num-prompts", str(workload.requests),
        "--random-input-len", str(workload.input_len),
        "--random-output-len", str(workload.output_len),
        "--max-concurrency", str(workload.concurrency), "--request-rate", "inf",
        "--ignore-eos", "--disable-tqdm", "--seed", "0",
    ]


def run_vllm(base_url: str, workload: Workload, profile_path: str | None) -> dict[str, Any]:
    """``vllm bench serve`` from Python (the CPU build has no working ``vllm`` command)."""
    from vllm.benchmarks import serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    serve.add_cli_args(parser)
    cpu = {}
    benchmark = serve.benchmark

    async def timed_benchmark(*args: Any, **kwargs: Any) -> Any:
        """serve.benchmark is the timed part of ``vllm bench serve``; count its CPU seconds."""
        start = time.process_time()
        try:
            return await benchmark(*args, **kwargs)
        finally:
            cpu["client_cpu_s"] = time.process_time() - start

    serve.benchmark = timed_benchmark
    result = serve.main(parser.parse_args(vllm_bench_argv(base_url, workload)))
    return {"duration_s": result["duration"], "completed": result["completed"],
            "failed": result["failed"], "output_tokens": result["total_output_tokens"],
            "requests_per_s": result["request_throughput"],
            "tokens_per_s": result["output_throughput"], **cpu}


CLIENTS = {"ours": run_ours, "vllm": run_vllm}


def _client_child(client: str, base_url: str, workload: Workload, log_path: str,
                  profile_path: str | None, results: mp.Queue) -> None:
    """Child process body: pin to the client core, send its output to a log, run one client."""
    os.sched_setaffinity(0, {CLIENT_CORE})
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        results.put(CLIENTS[client](base_url, workload, profile_path))
    except BaseException as exc:
        results.put({"error": f"{type(exc).__name__}: {exc}"})
        raise


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (from /proc, 10 ms resolution)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_client(client: str, base_url: str, workload: Workload, server_pid: int, log_path: Path,
               profile_path: str | None = None) -> ClientRun:
    """One run of one client in a fresh pinned child process."""
    context = mp.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_client_child, args=(
        client, base_url, workload, str(log_path), profile_path, queue))
    server_cpu_before = _cpu_seconds(server_pid)
    child.start()
    outcome = queue.get(timeout=1800)
    child.join(timeout=60)
    server_cpu = _cpu_seconds(server_pid) - server_cpu_before
    if "error" in outcome:
        raise RuntimeError(f"{client} client failed: {outcome['error']} (log: {log_path})")
    return ClientRun(client=client, server_cpu_s=server_cpu, **outcome)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs > 0 else "-"


def results_table(runs: list[ClientRun], workload: Workload, title: str):
    """One rich table: per run and median, ours beside vLLM's, with the ratio ours/vLLM's."""
    from rich.table import Table

    ours = [r for r in runs if r.client == "ours"]
    vllm = [r for r in runs if r.client == "vllm"]
    table = Table(title=title)
    for column in ("run", "ours req/s", "vLLM req/s", "ratio", "ours tok/s", "vLLM tok/s",
                   "ratio", "ours ok/failed", "vLLM ok/failed", "client core busy ours/vLLM",
                   "server core busy ours/vLLM"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for index, (mine, theirs) in enumerate(zip(ours, vllm), start=1):
        table.add_row(
            f"run {index}",
            f"{mine.requests_per_s:.1f}", f"{theirs.requests_per_s:.1f}",
            _ratio(mine.requests_per_s, theirs.requests_per_s),
            f"{mine.tokens_per_s:,.0f}", f"{theirs.tokens_per_s:,.0f}",
            _ratio(mine.tokens_per_s, theirs.tokens_per_s),
            f"{mine.completed}/{mine.failed}", f"{theirs.completed}/{theirs.failed}",
            f"{mine.client_busy:.0%} / {theirs.client_busy:.0%}",
            f"{mine.server_busy:.0%} / {theirs.server_busy:.0%}",
        )
    median = statistics.median
    ours_rps, vllm_rps = median(r.requests_per_s for r in ours), median(r.requests_per_s for r in vllm)
    ours_tps, vllm_tps = median(r.tokens_per_s for r in ours), median(r.tokens_per_s for r in vllm)
    table.add_row("median", f"{ours_rps:.1f}", f"{vllm_rps:.1f}", _ratio(ours_rps, vllm_rps),
                  f"{ours_tps:,.0f}", f"{vllm_tps:,.0f}", _ratio(ours_tps, vllm_tps),
                  "", "", "", "", style="bold")
    table.caption = (f"{workload.requests} requests, {workload.output_len} output tokens each, "
                     f"concurrency {workload.concurrency}; client on core {CLIENT_CORE}, "
                     f"server on core {SERVER_CORE}")
    return table


def load_average() -> str:
    return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400, help="requests per run")
    parser.add_argument("--input-len", type=int, default=32, help="prompt length (tokens/words)")
    parser.add_argument("--output-len", type=int, default=64, help="output tokens per request")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--runs", type=int, default=2, help="runs per client (alternating)")
    parser.add_argument("--server-writes", choices=("per-token", "burst"), default="per-token",
                        help="one write per SSE chunk (default) or one write per response")
    parser.add_argument("--profile", metavar="PATH",
                        help="also run our client once under cProfile and save the stats here")
    parser.add_argument("--log-dir", type=Path, default=None,
                        help="where the clients' own output goes (default: a temp folder)")
    parser.add_argument("--json", type=Path, default=None, help="also save every run as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    args = parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 140)  # whole table when piped
    if len(os.sched_getaffinity(0) & {CLIENT_CORE, SERVER_CORE}) < 2:
        console.print(f"[red]needs cores {CLIENT_CORE} and {SERVER_CORE}[/red]")
        return 2
    workload = Workload(args.requests, args.input_len, args.output_len, args.concurrency)
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="client_overhead-"))
    log_dir.mkdir(parents=True, exist_ok=True)

    console.print(f"before: {load_average()}")
    server, base_url = start_server(per_token=args.server_writes == "per-token")
    console.print(f"test server pid {server.pid} at {base_url} "
                  f"({args.server_writes} writes); client logs in {log_dir}")
    runs: list[ClientRun] = []
    try:
        for index in range(1, args.runs + 1):
            for client in ("ours", "vllm"):
                run = run_client(client, base_url, workload, server.pid,
                                 log_dir / f"{client}-{index}.log")
                console.print(f"  {client} run {index}: {run.requests_per_s:.1f} req/s, "
                              f"{run.tokens_per_s:,.0f} tok/s in {run.duration_s:.2f} s "
                              f"(client core busy {run.client_busy:.0%}, "
                              f"server core busy {run.server_busy:.0%})")
                runs.append(run)
        if args.profile:
            profiled = run_client("ours", base_url, workload, server.pid,
                                  log_dir / "ours-profile.log", profile_path=args.profile)
            console.print(f"  ours under cProfile: {profiled.requests_per_s:.1f} req/s; "
                          f"stats in {args.profile}")
    finally:
        server.terminate()  # the server process this script started, by its own handle
        server.join(timeout=10)
    console.print(f"after: {load_average()}")
    console.print(results_table(runs, workload, f"Client overhead ({args.server_writes} writes)"))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
