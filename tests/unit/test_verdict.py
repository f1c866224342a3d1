"""The one verdict: what `tuner optimize`, `tuner best`, its --json and the dashboard recommend,
from a real SQLite database filled by the real study loop, with a stand-in for the measurement
(a unit test of the rooms above the trial; tests/integration runs the real vLLM server)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient
from rich.console import Console

from fakes import Quiet, fake_measurement
from tuner.engine import ServerOptions
from tuner.engine.deploy import production_args
from tuner.metrics import latency_between, parse_counters
from tuner.replay import LoadSpec, RequestResult, summarize
from tuner.outputs.report import trials_table, verdict_text
from tuner.plan.space import SearchSpace
from tuner.study.loop import optimize
from tuner.plan.study_plan import plan_study
from tuner.store import ResultStore, open_database, optuna_storage
from tuner.measure.trial import MeasureSettings
from tuner.decide.marks import CLIENT_BOUND, CLIENT_LAG, COALESCED, run_marks
from tuner.web import create_app
from tuner.workload import Request, Workload

TUNER = [sys.executable, "-m", "tuner.cli"]
NGRAM_SPACE = SearchSpace(methods=("ngram",), ks=(2, 4))


@pytest.fixture
def study(tmp_path):
    """A workload, a real SQLite database and a way to run the study loop on a stand-in."""
    url = f"sqlite:///{tmp_path / 'tuner.db'}"
    path = tmp_path / "code.jsonl"
    path.write_text('{"prompt": "x"}\n')
    workload = Workload(path=path, type="code", requests=(Request(line=1, prompt="x"),))
    store = ResultStore(open_database(url))

    def run(measure, options, server_args=(), synthetic_acceptance=None):
        settings = MeasureSettings(server=ServerOptions(log_dir=tmp_path, server_args=list(server_args),
                                                        synthetic_acceptance=synthetic_acceptance))
        return optimize("m", workload, NGRAM_SPACE, settings, store, optuna_storage(url), options, Quiet(),
                        measure=measure)

    return url, store, run


def faster_with_k(model, spec, workload, settings, progress):
    return [fake_measurement(spec, 100.0 + (spec.k * 20 if spec else 0))]


def best_json(url: str, *args: str) -> list[dict]:
    result = subprocess.run([*TUNER, "best", "--json", "--db", url, *args], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_study_whose_targets_nothing_meets_names_no_winner_anywhere(study):
    url, store, run = study
    # Every config's p99 TPOT is 30 ms in the stand-in: a 1 ms target is out of reach.
    (options,) = [plan_study(slos=["tpot_p99_ms<=1"], strategy="grid").options]
    outcome = run(faster_with_k, options)
    assert outcome.verdict.kind == "none" and outcome.verdict.serve_command() is None
    assert outcome.verdict.headline.startswith("no configuration meets tpot_p99_ms<=1; the closest is")

    (best,) = best_json(url)
    assert best["winner"] is None and best["serve_command"] is None and best["speculative_config"] is None
    assert best["deployable"] is False
    assert best["verdict"] == outcome.verdict.headline  # the same words in optimize and best

    client = TestClient(create_app(url))
    page = client.get("/model", params={"model": "m", "type": "code"})
    assert page.status_code == 200
    assert 'id="no-winner"' in page.text and 'id="serve-command"' not in page.text
    assert "no configuration meets tpot_p99_ms&lt;=1" in page.text
    (api,) = client.get("/api/best").json()
    assert api["winner"] is None and api["serve_command"] is None
    assert "no configuration meets the targets" in client.get("/").text


def test_the_deploy_line_drops_tuning_only_arguments(study, tmp_path):
    url, store, run = study
    plan = plan_study(strategy="grid", server_args=["--enforce-eager", "--max-model-len=512",
                                                    "--gpu-memory-utilization=0.8"],
                      deploy_args=["--max-num-seqs=64"])
    assert plan.server_args[-1] == "--max-num-seqs=64"  # deploy args reach the trials' servers too
    outcome = run(faster_with_k, plan.options, plan.server_args)
    line = outcome.verdict.serve_command()
    assert line == ("vllm serve m --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
                    "\"prompt_lookup_max\": 4, \"prompt_lookup_min\": 2}' --gpu-memory-utilization=0.8 "
                    "--max-num-seqs=64")
    assert "--enforce-eager" not in line and "--max-model-len" not in line
    target = tmp_path / "speculative-config.json"
    (best,) = best_json(url, "--write-config", str(target))
    assert best["serve_command"] == line
    assert json.loads(target.read_text()) == best["speculative_config"] == outcome.verdict.deployed
    view = TestClient(create_app(url)).get("/api/model", params={"model": "m", "type": "code"}).json()
    assert view["serve_command"] == line


def test_production_args_understand_both_forms_and_deploy_marks():
    args = ["--enforce-eager", "--max-model-len", "512", "--load-format=dummy", "--seed", "3",
            "--max-model-len=4096"]
    assert production_args(args) == ["--seed", "3"]
    assert production_args(args, keep=["--max-model-len=4096"]) == ["--seed", "3", "--max-model-len=4096"]


# A baseline replay shaped like the one `make demo` printed as "TPOT p50 change: +35088.2%": every
# request's 64 tokens reached the client in one burst (TTFT = e2e within 0.3 ms), while the
# server's own histograms say 40 ms per token.
BURST = [RequestResult(f"r{i}", 0.1 * i, ok=True, ttft_s=2.5 + 0.01 * i, e2e_s=2.5003 + 0.01 * i,
                       output_tokens=64, text_digest="d", greedy=False) for i in range(8)]
SERVER_METRICS = """\
vllm:request_time_per_output_token_seconds_sum{engine="0"} %s
vllm:request_time_per_output_token_seconds_count{engine="0"} %s
vllm:generation_tokens_total{engine="0"} %s
"""


def test_a_recorded_coalesced_stream_is_marked_and_prints_no_percentage(study):
    url, store, run = study
    before = parse_counters(SERVER_METRICS % (0.0, 0, 0))
    after = parse_counters(SERVER_METRICS % (8 * 0.04, 8, 512))
    server = latency_between(before, after)
    assert server.tpot_mean_s == pytest.approx(0.04)
    summary = summarize(BURST, 3.0)
    assert run_marks(summary, BURST, server, 512) == (COALESCED,)
    assert run_marks(summary, BURST, None, 512) == (COALESCED,)  # the client's timings alone tell too

    def measure(model, spec, workload, settings, progress):
        m = fake_measurement(spec, 150.0 if spec else 100.0, tpot=0.02)
        if spec is None:  # the baseline's replay is the burst
            m = replace(m, runs=[replace(m.runs[0], summary=replace(summary, output_tokens_per_s=100.0),
                                         server_latency=server, marks=(COALESCED,))])
        return [m]

    outcome = run(measure, plan_study(strategy="grid").options)
    baseline = outcome.verdict.answers["concurrency 1"].baseline
    assert baseline.marks == (COALESCED,) and baseline.server_tpot_mean_s == pytest.approx(0.04)
    assert outcome.answer.tpot_change is None
    console = Console(record=True, width=300)
    console.print(trials_table(store.trials()))
    console.print(verdict_text(outcome.verdict))
    text = console.export_text()
    assert "TPOT p50 change: not shown, a latency figure is marked untrusted" in text
    assert "TPOT p50 change: +" not in text and "TPOT p50 change: -" not in text
    assert "coalesced stream" in text  # in the table and in the answer's notes
    (best,) = best_json(url)
    assert best["tpot_change"] is None and best["baseline"]["marks"] == [COALESCED]


def test_a_marked_replay_is_replayed_once_and_the_new_one_kept(monkeypatch):
    from tuner.measure import trial as trial_module

    def run_result(marks):
        m = fake_measurement(None, 100.0)
        return replace(m.runs[0], marks=marks)

    replays = [run_result((COALESCED,)), run_result(())]
    monkeypatch.setattr(trial_module, "_replay_once", lambda *a: replays.pop(0))
    monkeypatch.setattr(trial_module, "_reset_prefix_cache", lambda server: None)
    (kept,) = trial_module._replays(None, "m", None, None, LoadSpec(), MeasureSettings(), Quiet())
    assert kept.marks == () and kept.remeasured == (COALESCED,) and not replays


# vLLM's own bucket bounds (seconds) for TTFT and e2e.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)


def histogram_text(name: str, bounds: tuple[float, ...], observations: list[float]) -> str:
    lines = [f'{name}_bucket{{engine="0",le="{le}"}} {sum(o <= le for o in observations)}' for le in bounds]
    lines.append(f'{name}_bucket{{engine="0",le="+Inf"}} {len(observations)}')
    lines.append(f'{name}_sum{{engine="0"}} {sum(observations)}')
    lines.append(f'{name}_count{{engine="0"}} {len(observations)}')
    return "\n".join(lines) + "\n"


def server_window(ttft: list[float], e2e: list[float]):
    empty = parse_counters(histogram_text("vllm:time_to_first_token_seconds", TTFT_BUCKETS, [])
                           + histogram_text("vllm:e2e_request_latency_seconds", E2E_BUCKETS, []))
    after = parse_counters(histogram_text("vllm:time_to_first_token_seconds", TTFT_BUCKETS, ttft)
                           + histogram_text("vllm:e2e_request_latency_seconds", E2E_BUCKETS, e2e))
    return latency_between(empty, after)


def client_run(ttft_s: float, e2e_s: float) -> list[RequestResult]:
    return [RequestResult(f"r{i}", 0.1 * i, ok=True, ttft_s=ttft_s + 0.001 * i, e2e_s=e2e_s + 0.001 * i,
                          output_tokens=64, greedy=False) for i in range(16)]


def test_a_client_far_behind_the_servers_own_medians_is_marked():
    """The demo on a busy 2-core host: the client's TTFT p50 was 427 ms while the server's own
    histograms put the same requests' TTFT at 22 ms (a mean, which a few stragglers pull up: the
    server's median bucket is the check)."""
    server = server_window([0.018] * 12 + [0.06] * 4, [0.6] * 16)
    assert server.median_bounds["ttft"] == (0.01, 0.02) and server.median_bounds["e2e"] == (0.5, 0.8)
    lagging = client_run(ttft_s=0.427, e2e_s=1.0)
    assert run_marks(summarize(lagging, 2.0), lagging, server, -1) == (CLIENT_LAG,)
    # A client a few ms behind (HTTP, detokenizing) is the normal case: no mark.
    keeping_up = client_run(ttft_s=0.025, e2e_s=0.62)
    assert run_marks(summarize(keeping_up, 2.0), keeping_up, server, -1) == ()
    # Only the e2e lagging tells too; without the server's buckets nothing is judged on them.
    late = client_run(ttft_s=0.03, e2e_s=1.9)
    assert run_marks(summarize(late, 2.0), late, server, -1) == (CLIENT_LAG,)
    assert run_marks(summarize(lagging, 2.0), lagging, None, -1) == ()


def test_a_client_still_lagging_when_replayed_once_more_is_bound_and_said_once(study, monkeypatch):
    from tuner.measure import trial as trial_module

    def run_result(marks):
        return replace(fake_measurement(None, 100.0).runs[0], marks=marks)

    replays = [run_result((CLIENT_LAG,)), run_result((CLIENT_LAG,))]
    monkeypatch.setattr(trial_module, "_replay_once", lambda *a: replays.pop(0))
    monkeypatch.setattr(trial_module, "_reset_prefix_cache", lambda server: None)
    (kept,) = trial_module._replays(None, "m", None, None, LoadSpec(), MeasureSettings(), Quiet())
    assert kept.marks == (CLIENT_LAG, CLIENT_BOUND) and kept.remeasured == (CLIENT_LAG,)

    url, store, run = study

    def measure(model, spec, workload, settings, progress):
        m = fake_measurement(spec, 150.0 if spec else 100.0, tpot=0.02)
        if spec is None:  # the demo's baseline: the client at 427 ms, the server at 22 ms
            summary = m.runs[0].summary
            m = replace(m, runs=[replace(m.runs[0], summary=replace(summary, ttft=replace(summary.ttft, p50=0.427)),
                                         server_latency=server_window([0.022] * 16, [0.6] * 16),
                                         marks=kept.marks)])
        return [m]

    outcome = run(measure, plan_study(strategy="grid").options)
    assert outcome.answer.tpot_change is None
    busy = [n for n in outcome.verdict.notes if n.startswith("the host was too busy")]
    assert busy == ["the host was too busy for the tuner's client: baseline at concurrency 1 still lagged the "
                    "server when replayed once more (client TTFT p50 427 ms against the server's own mean 22 ms), "
                    "so those tokens/s are the client's pace, not the server's, and their latencies are not "
                    "compared; run the study again with the host otherwise idle, or give the tuner a core of "
                    "its own (e.g. taskset -c 1 tuner optimize ...)"]
    console = Console(record=True, width=300)
    console.print(verdict_text(outcome.verdict))
    assert "TPOT p50 change: +" not in console.export_text()


def greedy_requests(tokens_by_request: dict[str, list[int]]) -> list[RequestResult]:
    return [RequestResult(rid, 0.0, ok=True, ttft_s=0.1, e2e_s=1.0, output_tokens=len(tokens),
                          text_digest="-".join(map(str, tokens)), greedy=True, token_ids=tuple(tokens))
            for rid, tokens in tokens_by_request.items()]


BASELINE_TOKENS = {"r0": [1, 2, 3, 4], "r1": [5, 6, 7, 8]}


def changes_output_at_k4(model, spec, workload, settings, progress):
    """k=4 is fastest but its second request leaves the baseline's text at token 3."""
    tokens = dict(BASELINE_TOKENS)
    if spec is not None and spec.k == 4:
        tokens["r1"] = [5, 6, 7, 9]
    m = fake_measurement(spec, 100.0 + (spec.k * 20 if spec else 0))
    return [replace(m, runs=[replace(m.runs[0], requests=greedy_requests(tokens))])]


def test_a_trial_whose_greedy_text_differs_is_flagged_and_not_chosen(study):
    url, store, run = study
    outcome = run(changes_output_at_k4, plan_study(strategy="grid").options)
    k4 = next(r for r in store.trials() if r.label == "ngram k=4")
    # The stand-in baseline recorded no top-2 margins: the divergence counts as a real change.
    assert k4.greedy_match_rate == 0.5 and k4.first_divergence == {"request": "r1", "token": 3, "run": 0,
                                                                   "margin": None, "near_tie": False}
    assert k4.greedy_near_tie_rate == 0 and k4.greedy_change_rate == 0.5
    assert outcome.verdict.label == "ngram k=2"  # not the faster k=4
    (note,) = [n for n in outcome.verdict.notes if "ngram k=4" in n]
    assert ("greedy output differed from the baseline's on 50% of requests beyond numeric near-ties "
            "(first at request r1, token 3)") in note
    (best,) = best_json(url)
    assert best["deployed_label"] == "ngram k=2"


def test_allow_output_change_chooses_it_with_a_warning(study):
    url, store, run = study
    outcome = run(changes_output_at_k4, plan_study(strategy="grid", allow_output_change=True).options)
    assert outcome.verdict.label == "ngram k=4"
    assert any("allowed by --allow-output-change" in n for n in outcome.verdict.notes)
    (best,) = best_json(url)  # the stored rule, not a flag of `tuner best`
    assert best["deployed_label"] == "ngram k=4"


def test_under_synthetic_acceptance_the_note_says_why_output_is_not_compared(study):
    """--synthetic-acceptance allows output change by itself (tuner/plan/study_plan.py): the note
    names that cause, not a flag the user never gave, and `tuner best` reads it from the store."""
    url, store, run = study
    outcome = run(changes_output_at_k4, plan_study(strategy="grid", allow_output_change=True).options,
                  synthetic_acceptance=(0.8, 0.6))
    (note,) = [n for n in outcome.verdict.notes if "ngram k=4 changed greedy output" in n]
    assert "not compared: acceptance was synthetic (0.8,0.6)" in note
    assert "--allow-output-change" not in note
    (best,) = best_json(url)
    assert any("acceptance was synthetic (0.8,0.6)" in n for n in best["notes"])
