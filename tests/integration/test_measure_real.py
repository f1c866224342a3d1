"""`tuner measure` end to end on the REAL vLLM server (CPU build) and the project's tiny models.

Each test starts its own server (a config is fixed at start), through the CLI as a user would,
on the first 16 requests of a workload (REQUESTS).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reference_study import ENV, REQUESTS, SERVER_ARGS, short_code_workload
from tuner.engine.server import port_is_free, process_group_alive

pytestmark = pytest.mark.integration


def run_measure(tmp_path: Path, models: Path, *args: str, workload: str = "code") -> subprocess.CompletedProcess:
    command = [
        sys.executable, "-m", "tuner.cli", "measure",
        "--workload", str(short_code_workload(tmp_path, kind=workload)),
        "--model", str(models / "target"),
        "--concurrency", "2", "--log-dir", str(tmp_path / "logs"), "--json", *SERVER_ARGS, *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=600)


def measured(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def assert_common(m: dict, repeats: int = 1) -> None:
    assert [run["repeat"] for run in m["runs"]] == list(range(repeats))
    for run in m["runs"]:
        assert_run(run)
    tokens_per_s = [run["summary"]["output_tokens_per_s"] for run in m["runs"]]
    assert m["tokens_per_s"]["n"] == repeats
    assert min(tokens_per_s) <= m["tokens_per_s"]["median"] <= max(tokens_per_s)
    # Nothing the server started survives, and its port is free again.
    assert not process_group_alive(m["server"]["pid"])
    assert port_is_free(m["server"]["port"])
    assert Path(m["server"]["log_path"]).stat().st_size > 0
    assert m["server"]["vllm_version"]


def assert_run(run: dict) -> None:
    summary = run["summary"]
    assert summary["output_tokens_per_s"] > 0
    assert summary["failed"] == 0 and summary["completed"] == summary["requests"] == REQUESTS
    for name in ("ttft", "tpot", "e2e"):
        assert 0 < summary[name]["p50"] <= summary[name]["p99"]
    # The client's token count and the server's own counter agree over the measured window,
    # so warm-up is excluded from both.
    assert run["server_generation_tokens"] == summary["output_tokens"]


def assert_acceptance(m: dict, k: int) -> None:
    a = m["runs"][0]["acceptance"]
    assert a is not None and a["drafts"] > 0
    assert 0.0 <= a["acceptance_rate"] <= 1.0
    assert 1.0 <= a["mean_acceptance_length"] <= k + 1
    per_pos = a["per_position"]
    assert len(per_pos) == k
    assert all(0.0 <= p <= 1.0 for p in per_pos)
    # Unconditional per-position rates can only fall with the position.
    assert all(x >= y for x, y in zip(per_pos, per_pos[1:])), per_pos
    assert sum(per_pos) == pytest.approx(a["mean_acceptance_length"] - 1, abs=1e-9)
    # Per request: vLLM's own counts (--per-request-spec-decode-metrics) add up to its counters
    # over the same replay, and the streams' chunks show the same accepted drafts.
    for run in m["runs"]:
        total, counters = run["request_acceptance"]["total"], run["acceptance"]
        assert (total["server_steps"], total["server_drafted"], total["server_accepted"]) == (
            counters["drafts"], counters["draft_tokens"], counters["accepted_tokens"])
        # The streams may show up to k fewer per request: drafts accepted past max_tokens are
        # counted by vLLM and never sent.
        assert counters["accepted_tokens"] - k * REQUESTS <= total["stream_accepted"] <= counters["accepted_tokens"] + 2
        assert total["requests"] == REQUESTS and "acceptance disagrees with /metrics" not in run["marks"]
        buckets = run["request_acceptance"]["by_context"]
        assert sum(b["steps"] for b in buckets) == total["stream_steps"] > 0
        assert all(1.0 <= b["tokens_per_step"] <= k + 1 for b in buckets)


def test_baseline_has_no_acceptance_with_a_fresh_server_per_repeat(tmp_path, tiny_models):
    m = measured(run_measure(tmp_path, tiny_models, "--repeats", "2", "--repeat-mode", "fresh-server"))
    assert m["spec"] is None and all(run["acceptance"] is None for run in m["runs"])
    assert_common(m, repeats=2)
    assert len(list((tmp_path / "logs").iterdir())) == 2  # one server, and one log, per repeat


@pytest.mark.parametrize("k", [4])
def test_ngram_measured_once_the_server_is_steady(tmp_path, tiny_models, k):
    """--warmup-until-steady: the load's requests are replayed, unmeasured, until their tokens/s
    stops rising; the measured run's token counts (client and server) exclude them."""
    from tuner.measure.trial import MAX_WARMUP_REPLAYS, steady

    spec = {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    m = measured(run_measure(tmp_path, tiny_models, "--spec", json.dumps(spec), "--warmup-until-steady"))
    assert m["spec"] == spec
    assert_common(m)
    assert_acceptance(m, k)
    warm = m["warmup_tokens_per_s"]
    assert 2 <= len(warm) <= MAX_WARMUP_REPLAYS and all(v > 0 for v in warm)
    assert steady(warm) or len(warm) == MAX_WARMUP_REPLAYS
    assert not any(steady(warm[:n]) for n in range(2, len(warm)))  # it stopped at the first steady one


def test_draft_model_on_chat_traffic_with_two_repeats(tmp_path, tiny_models):
    m = measured(run_measure(tmp_path, tiny_models, "--method", "draft_model",
                             "--draft", str(tiny_models / "draft"), "--k", "3", "--repeats", "2",
                             workload="chat"))
    assert m["workload_type"] == "chat"
    assert_common(m, repeats=2)
    assert_acceptance(m, 3)
    first, second = m["runs"]
    # The prefix cache was reset between the runs, so the second run's prompts were computed
    # again; with temperature 0, the greedy texts are the same in both runs.
    digests = [{r["request_id"]: r["text_digest"] for r in run["requests"]} for run in (first, second)]
    same = sum(digests[0][k] == digests[1][k] for k in digests[0]) / len(digests[0])
    assert same >= 0.9, same


# A missing draft and an unknown config key in `tuner measure` are covered by the fault suite
# (tests/faults/test_server_faults.py::test_a_missing_draft_and_refusals_before_any_start).


def test_traffic_the_replay_did_not_send_is_marked(tmp_path, tiny_models):
    """A request sent beside the replay, inside its /metrics window: the server's counters count
    its drafts, the replay's requests do not, so the acceptance is marked, not trusted silently."""
    import httpx

    from tuner.engine import ServerOptions, SpecConfig, VllmServer
    from tuner.engine.installed import per_request_spec_metrics
    from tuner.measure.trial import MeasureSettings, NoProgress, measure_on_server
    from tuner.replay import LoadSpec
    from tuner.workload import load_workload

    spec = SpecConfig(method="ngram", num_speculative_tokens=4)
    options = ServerOptions(server_args=["--enforce-eager", "--max-model-len=1024"], log_dir=tmp_path,
                            per_request_acceptance=per_request_spec_metrics())
    workload = load_workload(short_code_workload(tmp_path, requests=4))
    repetitive = " ".join(["def f(x): return x + 1"] * 20)
    with VllmServer(str(tiny_models / "target"), spec, options) as server:
        class StrayTraffic(NoProgress):
            def start_replay(self, description: str, total: int) -> None:
                if description.startswith("replay"):  # inside the measured window, not the warm-up
                    httpx.post(f"{server.base_url}/v1/completions", timeout=120, json={
                        "model": str(tiny_models / "target"), "prompt": repetitive, "max_tokens": 96,
                        "ignore_eos": True, "temperature": 0}).raise_for_status()

        (m,) = measure_on_server(server, str(tiny_models / "target"), spec, workload,
                                 MeasureSettings(load=LoadSpec(), warmup=1, server=options), StrayTraffic())
    run = m.median_run
    total, counters = run.request_acceptance.total, run.acceptance
    print(f"requests' own accepted drafts {total.accepted_tokens} (stream {total.stream_accepted}), "
          f"/metrics {counters.accepted_tokens}")
    assert counters.accepted_tokens > total.stream_accepted + 2
    assert "acceptance disagrees with /metrics" in m.marks()
