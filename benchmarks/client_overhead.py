"""Client overhead: how fast can a streaming client go when the server costs nothing?

A measurement of speculative decoding is only valid if the client that sends the requests is
never the bottleneck. This benchmark puts the tuner's replay client (``tuner.replay.replay``)
and vLLM's own client (``vllm bench serve``) in front of a test server that answers instantly,
and reports the requests/s and output tokens/s each client sustains on one CPU core.

- The test server is a small asyncio HTTP/1.1 server (keep-alive, chunked transfer encoding) in
  its own process pinned to core 1. ``POST /v1/completions`` with ``stream: true`` streams
  ``max_tokens`` SSE chunks ``data: {"choices":[{"text":"x","index":0}]}``, then a usage chunk
  and ``data: [DONE]``. ``--server-writes per-token`` (default) writes each SSE chunk
  separately and yields to the event loop in between, like a real server's decode steps;
  ``burst`` writes a whole response at once. The server also answers ``GET /v1/models`` and
  ``GET /stats`` (TCP connections accepted so far); ``/tokenize`` and ``/metrics``, which
  ``vllm bench serve`` probes, get a 404, which it treats as "not available".
- Each client run is a fresh child process pinned to core 0. The two clients alternate
  (ours, vLLM's, ours, vLLM's, ...); each reports its own duration and throughput.
- The first table puts the clients side by side, with the TCP connections the server accepted
  per run: a client that keeps its connections alive opens about one per concurrent stream,
  not one per request. The second shows how each run's timed window was spent on both cores,
  measured from inside the client: the client's (server's) own CPU time, other processes, idle.
  The client near 100 % of core 0 and the server well below 100 % of core 1 is the intended
  regime (the client is the limit). Client core idle means the client waited on the server;
  "others" means the machine was not quiet, and such runs are marked with * in the first table.
  Before each run the script waits (up to ``--quiet-timeout``) for both cores to be idle.

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

    connections_opened = 0  # over the server's life; GET /stats reports it

    def __init__(self, per_token: bool) -> None:
        self.per_token = per_token
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        InstantSSEServer.connections_opened += 1

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
        elif method == "GET" and path == "/stats":
            self.transport.write(_json_response(
                "200 OK", {"connections_opened": InstantSSEServer.connections_opened}))
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

    async def run() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: InstantSSEServer(per_token), "127.0.0.1", 0,
                                          backlog=1024)
        port_queue.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    try:
        import uvloop  # the server should be as cheap as possible; the clients keep their loop
    except ImportError:
        asyncio.run(run())
    else:
        uvloop.run(run())


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
# Where the two cores went during a client's timed window
# --------------------------------------------------------------------------------------------


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (from /proc, 10 ms resolution)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def core_seconds(core: int) -> tuple[float, float]:
    """(idle, total) seconds of one core since boot, from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name == f"cpu{core}":
            ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
            hertz = os.sysconf("SC_CLK_TCK")
            return (ticks[3] + ticks[4]) / hertz, sum(ticks) / hertz
    raise RuntimeError(f"no cpu{core} line in /proc/stat")


@dataclass(frozen=True)
class CoreUse:
    """Shares of one core over a window: the process meant to be there, all others, idle."""

    own: float
    others: float
    idle: float


class CoreWindow:
    """Measures, from inside the client, how both cores were used over its timed window.

    The client's CPU time is its own (``time.process_time``), the server's is read from /proc;
    "others" is what neither used nor left idle: another process on that core.
    """

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.result: dict[str, CoreUse] = {}

    def _sample(self) -> tuple[float, float, tuple[float, float], tuple[float, float]]:
        return (time.process_time(), process_cpu_seconds(self.server_pid),
                core_seconds(CLIENT_CORE), core_seconds(SERVER_CORE))

    def __enter__(self) -> CoreWindow:
        self.start = self._sample()
        return self

    def __exit__(self, *exc: object) -> None:
        end = self._sample()
        for key, index, core_index in (("client_core", 0, 2), ("server_core", 1, 3)):
            idle = end[core_index][0] - self.start[core_index][0]
            total = max(end[core_index][1] - self.start[core_index][1], 1e-9)
            own = min((end[index] - self.start[index]) / total, 1.0)
            idle_share = idle / total
            self.result[key] = CoreUse(own, max(0.0, 1.0 - own - idle_share), idle_share)


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
    """What one client reported about one run, and how the cores were used meanwhile."""

    client: str
    duration_s: float
    completed: int
    failed: int
    output_tokens: int
    requests_per_s: float
    tokens_per_s: float
    client_core: CoreUse
    server_core: CoreUse
    connections: int = 0  # TCP connections the server accepted during the run

    @property
    def noisy(self) -> bool:
        """Another process took more than NOISE_SHARE of either core during the timed window."""
        return max(self.client_core.others, self.server_core.others) > NOISE_SHARE


NOISE_SHARE = 0.10  # /proc counts in 10 ms ticks: 5 % of a 0.3 s run is one tick and a half


def run_ours(base_url: str, workload: Workload, window: CoreWindow,
             profile_path: str | None) -> dict[str, Any]:
    """The tuner's replay client on synthetic completions requests, timed by its own duration."""
    sys.path.insert(0, str(REPO))
    from tuner.replay import LoadSpec, replay, summarize
    from tuner.workload import Request

    prompt = " ".join(["token"] * workload.input_len)
    requests = [Request(line=i + 1, prompt=f"{i} {prompt}", output_tokens=workload.output_len)
                for i in range(workload.requests)]
    load = LoadSpec("concurrency", workload.concurrency)
    with window:
        if profile_path:
            import cProfile
            profiler = cProfile.Profile()
            results, duration = profiler.runcall(replay, base_url, MODEL_NAME, requests, load)
            profiler.dump_stats(profile_path)
        else:
            results, duration = replay(base_url, MODEL_NAME, requests, load)
    summary = summarize(results, duration)
    return {"duration_s": duration, "completed": summary.completed, "failed": summary.failed,
            "output_tokens": summary.output_tokens, "requests_per_s": summary.requests_per_s,
            "tokens_per_s": summary.output_tokens_per_s}


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


def run_vllm(base_url: str, workload: Workload, window: CoreWindow,
             profile_path: str | None) -> dict[str, Any]:
    """``vllm bench serve`` from Python (the CPU build has no working ``vllm`` command)."""
    from vllm.benchmarks import serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    serve.add_cli_args(parser)
    benchmark = serve.benchmark

    async def watched_benchmark(*args: Any, **kwargs: Any) -> Any:
        """serve.benchmark holds the timed part of ``vllm bench serve``: watch the cores."""
        with window:
            return await benchmark(*args, **kwargs)

    serve.benchmark = watched_benchmark
    result = serve.main(parser.parse_args(vllm_bench_argv(base_url, workload)))
    return {"duration_s": result["duration"], "completed": result["completed"],
            "failed": result["failed"], "output_tokens": result["total_output_tokens"],
            "requests_per_s": result["request_throughput"],
            "tokens_per_s": result["output_throughput"]}


CLIENTS = {"ours": run_ours, "vllm": run_vllm}


def _client_child(client: str, base_url: str, workload: Workload, server_pid: int,
                  log_path: str, profile_path: str | None, results: mp.Queue) -> None:
    """Child process body: pin to the client core, send its output to a log, run one client."""
    os.sched_setaffinity(0, {CLIENT_CORE})
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        window = CoreWindow(server_pid)
        outcome = CLIENTS[client](base_url, workload, window, profile_path)
        results.put({**outcome, **window.result})
    except BaseException as exc:
        results.put({"error": f"{type(exc).__name__}: {exc}"})
        raise


def connections_opened(base_url: str) -> int:
    """TCP connections the test server has accepted so far, this query's own included."""
    with urllib.request.urlopen(base_url + "/stats", timeout=10) as response:
        return int(json.load(response)["connections_opened"])


def run_client(client: str, base_url: str, workload: Workload, server_pid: int, log_path: Path,
               profile_path: str | None = None) -> ClientRun:
    """One run of one client in a fresh pinned child process."""
    context = mp.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_client_child, args=(
        client, base_url, workload, server_pid, str(log_path), profile_path, queue))
    connections_before = connections_opened(base_url)
    child.start()
    outcome = queue.get(timeout=1800)
    child.join(timeout=60)
    connections = connections_opened(base_url) - connections_before - 1  # minus the query
    if "error" in outcome:
        raise RuntimeError(f"{client} client failed: {outcome['error']} (log: {log_path})")
    return ClientRun(client=client, connections=connections, **outcome)


def wait_for_quiet(timeout_s: float, console: Any) -> None:
    """Wait (up to ``timeout_s``) until both cores are at least 90 % idle over 2 s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = [core_seconds(core) for core in (CLIENT_CORE, SERVER_CORE)]
        time.sleep(2)
        after = [core_seconds(core) for core in (CLIENT_CORE, SERVER_CORE)]
        if all((a[0] - b[0]) / max(a[1] - b[1], 1e-9) >= 0.9 for a, b in zip(after, before)):
            return
    console.print(f"  [yellow]the machine did not go quiet within {timeout_s:g} s[/yellow]")


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs > 0 else "-"


def _flagged(run: ClientRun, text: str) -> str:
    return text + ("*" if run.noisy else "")


def _median(runs: list[ClientRun], field: str) -> float:
    return statistics.median(getattr(run, field) for run in runs)


def results_table(runs: list[ClientRun], workload: Workload, title: str) -> Any:
    """Per run and median: ours beside vLLM's, with the ratio ours/vLLM's."""
    from rich.table import Table

    ours = [r for r in runs if r.client == "ours"]
    vllm = [r for r in runs if r.client == "vllm"]
    table = Table(title=title)
    for column in ("run", "ours req/s", "vLLM req/s", "ratio", "ours tok/s", "vLLM tok/s",
                   "ratio", "ok/failed ours | vLLM", "TCP connections ours | vLLM"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for index, (mine, theirs) in enumerate(zip(ours, vllm), start=1):
        table.add_row(
            f"run {index}",
            _flagged(mine, f"{mine.requests_per_s:.1f}"),
            _flagged(theirs, f"{theirs.requests_per_s:.1f}"),
            _ratio(mine.requests_per_s, theirs.requests_per_s),
            _flagged(mine, f"{mine.tokens_per_s:,.0f}"),
            _flagged(theirs, f"{theirs.tokens_per_s:,.0f}"),
            _ratio(mine.tokens_per_s, theirs.tokens_per_s),
            f"{mine.completed}/{mine.failed} | {theirs.completed}/{theirs.failed}",
            f"{mine.connections} | {theirs.connections}",
        )
    ours_rps, vllm_rps = _median(ours, "requests_per_s"), _median(vllm, "requests_per_s")
    ours_tps, vllm_tps = _median(ours, "tokens_per_s"), _median(vllm, "tokens_per_s")
    table.add_row("median", f"{ours_rps:.1f}", f"{vllm_rps:.1f}", _ratio(ours_rps, vllm_rps),
                  f"{ours_tps:,.0f}", f"{vllm_tps:,.0f}", _ratio(ours_tps, vllm_tps), "", "",
                  style="bold")
    table.caption = (f"{workload.requests} requests x {workload.output_len} output tokens, "
                     f"concurrency {workload.concurrency}; client on core {CLIENT_CORE}, "
                     f"server on core {SERVER_CORE}. * another process took more than "
                     f"{NOISE_SHARE:.0%} of a core during that run")
    return table


def cores_table(runs: list[ClientRun]) -> Any:
    """How each run's timed window was spent on the two cores."""
    from rich.table import Table

    table = Table(title="Where the cores went (share of each run's timed window)")
    for column in ("run", "duration s", f"core {CLIENT_CORE}: client", "others", "idle",
                   f"core {SERVER_CORE}: server", "others", "idle"):
        table.add_column(column, justify="left" if column == "run" else "right")
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.client] = counts.get(run.client, 0) + 1
        name = {"ours": "ours", "vllm": "vLLM"}[run.client]
        table.add_row(f"{name} run {counts[run.client]}", f"{run.duration_s:.2f}",
                      *(f"{share:.0%}" for share in (
                          run.client_core.own, run.client_core.others, run.client_core.idle,
                          run.server_core.own, run.server_core.others, run.server_core.idle)))
    table.caption = ("client near 100 %: the client was the limit, as intended; "
                     "client core idle: the client waited; others: another process")
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
    parser.add_argument("--quiet-timeout", type=float, default=120.0,
                        help="before each run, wait up to this many seconds for both cores to "
                             "be 90%% idle (0: do not wait)")
    parser.add_argument("--profile", metavar="PATH",
                        help="also run our client once under cProfile and save the stats here")
    parser.add_argument("--log-dir", type=Path, default=None,
                        help="where the clients' own output goes (default: a temp folder)")
    parser.add_argument("--json", type=Path, default=None, help="also save every run as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    args = parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 150)  # whole tables when piped
    if not {CLIENT_CORE, SERVER_CORE} <= os.sched_getaffinity(0):
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
                wait_for_quiet(args.quiet_timeout, console)
                run = run_client(client, base_url, workload, server.pid,
                                 log_dir / f"{client}-{index}.log")
                console.print(f"  {client} run {index}: {run.requests_per_s:.1f} req/s, "
                              f"{run.tokens_per_s:,.0f} tok/s in {run.duration_s:.2f} s, "
                              f"{run.connections} TCP connections"
                              + (" (noisy)" if run.noisy else ""))
                runs.append(run)
        if args.profile:
            wait_for_quiet(args.quiet_timeout, console)
            profiled = run_client("ours", base_url, workload, server.pid,
                                  log_dir / "ours-profile.log", profile_path=args.profile)
            console.print(f"  ours under cProfile: {profiled.requests_per_s:.1f} req/s; "
                          f"stats in {args.profile}")
    finally:
        server.terminate()  # the server process this script started, by its own handle
        server.join(timeout=10)
    console.print(f"after: {load_average()}")
    console.print(results_table(runs, workload, f"Client overhead ({args.server_writes} writes)"))
    console.print(cores_table(runs))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
