"""Latency that `tuner capture` adds: the same replay sent straight to vLLM and through the proxy.

One real vLLM server (CPU build, the tiny target model) and one `tuner capture` process in front
of it. Each round replays workloads/code.jsonl directly and through the proxy, in ABBA order so
that drift of this shared machine falls on both sides alike. Printed: median TTFT and end-to-end
latency per side, and the added latency (proxied minus direct, medians over all requests).

  python benchmarks/capture_overhead.py --rounds 4 --concurrency 1 --concurrency 4
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tuner.engine import ServerOptions
from tuner.engine.server import VllmServer, free_port, port_is_free
from tuner.replay import LoadSpec
from tuner.replay.client import replay
from tuner.workload import load_workload

ROOT = Path(__file__).resolve().parent.parent


def start_capture(upstream: str, out: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "tuner.cli", "capture", "--upstream", upstream,
                                "--out", str(out), "--listen", f"127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    while port_is_free(port):
        if process.poll() is not None:
            sys.exit("tuner capture exited before listening")
        time.sleep(0.2)
    return process, f"http://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="ABBA rounds per concurrency level")
    parser.add_argument("--concurrency", type=int, action="append", help="repeatable (default 1 and 4)")
    parser.add_argument("--models", type=Path, default=ROOT / ".models")
    args = parser.parse_args()
    levels = args.concurrency or [1, 4]
    requests = load_workload(ROOT / "workloads" / "code.jsonl").requests
    options = ServerOptions(server_args=["--enforce-eager", "--max-model-len=1024"],
                            log_dir=Path(tempfile.mkdtemp()),
                            env={"VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")})
    with VllmServer(str(args.models / "target"), None, options) as server, \
            tempfile.TemporaryDirectory() as tmp:
        proxy, proxy_url = start_capture(server.base_url, Path(tmp) / "captured.jsonl")
        try:
            replay(server.base_url, server.model, requests[:8], LoadSpec(concurrency=2))  # warm-up
            print(f"{len(requests)} requests of workloads/code.jsonl per replay, {args.rounds} ABBA rounds, "
                  f"vLLM {server.model} on {os.cpu_count()} CPUs")
            print(f"{'concurrency':>11} {'side':>8} {'TTFT p50 ms':>12} {'e2e p50 ms':>11} {'tok/s':>8}")
            for level in levels:
                figures: dict[str, dict[str, list[float]]] = {
                    side: {"ttft": [], "e2e": [], "tps": []} for side in ("direct", "proxied")}
                for round_ in range(args.rounds):
                    order = ("direct", "proxied") if round_ % 2 == 0 else ("proxied", "direct")
                    for side in order:
                        url = server.base_url if side == "direct" else proxy_url
                        results, wall = replay(url, server.model, requests, LoadSpec(concurrency=level))
                        if not all(r.ok for r in results):
                            sys.exit(f"{side} replay had failed requests: "
                                     f"{[r.error for r in results if not r.ok][:3]}")
                        figures[side]["ttft"] += [r.ttft_s * 1000 for r in results]
                        figures[side]["e2e"] += [r.e2e_s * 1000 for r in results]
                        figures[side]["tps"].append(sum(r.output_tokens for r in results) / wall)
                for side, f in figures.items():
                    print(f"{level:>11} {side:>8} {statistics.median(f['ttft']):>12.1f} "
                          f"{statistics.median(f['e2e']):>11.1f} {statistics.median(f['tps']):>8.1f}")
                d, p = figures["direct"], figures["proxied"]
                print(f"{level:>11} {'added':>8} {statistics.median(p['ttft']) - statistics.median(d['ttft']):>+12.1f} "
                      f"{statistics.median(p['e2e']) - statistics.median(d['e2e']):>+11.1f} "
                      f"{statistics.median(p['tps']) / statistics.median(d['tps']):>7.3f}x")
        finally:
            if proxy.poll() is None:
                os.killpg(proxy.pid, signal.SIGINT)
            proxy.wait(30)


if __name__ == "__main__":
    main()
