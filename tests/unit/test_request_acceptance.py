"""Acceptance per request and by context length: the buckets, the check against /metrics, the
note where a config stops paying at long contexts, and the context-length mix of a workload."""

from __future__ import annotations

import subprocess
import sys

from tuner.decide.by_context import context_note
from tuner.decide.marks import ACCEPTANCE_DISAGREES, acceptance_disagrees, run_marks
from tuner.metrics import Acceptance
from tuner.replay import RequestResult, summarize
from tuner.replay.acceptance import RequestSteps, by_context, requests_acceptance
from tuner.store import TrialRow
from tuner.workload import Request
from tuner.workload.stats import context_lengths, context_mix, left_out, length_bucket


def counters(drafts: int, draft_tokens: int, accepted: int) -> Acceptance:
    return Acceptance(drafts=drafts, draft_tokens=draft_tokens, accepted_tokens=accepted,
                      acceptance_rate=accepted / draft_tokens, mean_acceptance_length=1 + accepted / drafts,
                      per_position=())


def test_buckets_are_powers_of_two():
    assert [length_bucket(n) for n in (0, 255, 256, 511, 512, 3000)] == [
        (0, 256), (0, 256), (256, 512), (256, 512), (512, 1024), (2048, 4096)]


def test_tokens_per_step_by_context_bucket():
    short = RequestSteps("a", tokens=(3, 3, 1), contexts=(10, 13, 16))
    long = RequestSteps("b", tokens=(1, 2, 1), contexts=(600, 601, 603))
    assert by_context([short, long]) == [
        {"from": 0, "to": 256, "steps": 3, "tokens_per_step": 7 / 3},
        {"from": 512, "to": 1024, "steps": 3, "tokens_per_step": 4 / 3}]


def test_the_requests_total_is_held_against_the_counters():
    server = [RequestSteps("a", (3, 1), (10, 13), server=(2, 2, 6)), RequestSteps("b", (2,), (5,), server=(1, 1, 3))]
    total = requests_acceptance(server)
    assert (total.server_steps, total.server_drafted, total.server_accepted, total.stream_accepted) == (3, 9, 3, 3)
    assert not acceptance_disagrees(total, counters(3, 9, 3))
    # Traffic the replay did not send: the counters saw more steps and drafts than its requests.
    assert acceptance_disagrees(total, counters(13, 39, 20))
    # The stream alone (no counts from vLLM): accepted drafts only; a coalesced stream shows more.
    stream = requests_acceptance([RequestSteps("a", (4,) * 20, (10,) * 20)])  # 60 accepted, k = 3
    assert stream.source == "stream" and stream.server_steps is None
    assert not acceptance_disagrees(stream, counters(30, 90, 60))
    assert acceptance_disagrees(stream, counters(30, 90, 50))
    # Fewer in the stream by up to k per request: drafts accepted past max_tokens, never sent.
    assert not acceptance_disagrees(stream, counters(30, 90, 63))
    assert acceptance_disagrees(stream, counters(30, 90, 70))
    assert not acceptance_disagrees(None, counters(3, 9, 3)) and not acceptance_disagrees(total, None)


def test_a_disagreement_is_a_mark_of_the_replay():
    results = [RequestResult("a", 0.0, ok=True, ttft_s=0.1, e2e_s=1.0, output_tokens=10)]
    summary = summarize(results, 1.0)
    total = requests_acceptance([RequestSteps("a", (3, 3, 3), (1, 4, 7), server=(3, 6, 9))])
    assert ACCEPTANCE_DISAGREES in run_marks(summary, results, None, 10, counters(8, 24, 16), total)
    assert ACCEPTANCE_DISAGREES not in run_marks(summary, results, None, 10, counters(3, 9, 6), total)


def row(buckets: list[tuple], tokens_per_s: float = 120.0, baseline: bool = False) -> TrialRow:
    """A trial with these buckets: (from, tokens per step) or (from, tokens per step, tokens/s)."""
    return TrialRow(study_name="s", model="m", workload_type="code", load="concurrency 1",
                    optuna_trial_number=1, config=None if baseline else {"method": "eagle3", "num_speculative_tokens": 3},
                    label="baseline" if baseline else "eagle3 k=3", status="complete", failure_cause=None,
                    server_log_path=None, tokens_per_s=tokens_per_s, tpot_p50_s=0.01, ttft_p50_s=0.05,
                    acceptance_rate=0.6, mean_acceptance_length=2.2, per_position=[0.7, 0.5], finished_at=None,
                    vllm_version="0.32.0", host="h", server_args=[],
                    acceptance_by_context=[{"from": b[0], "to": max(256, b[0] * 2), "steps": 100,
                                            "tokens_per_step": b[1], **({"tokens_per_s": b[2]} if len(b) > 2 else {})}
                                           for b in buckets])


BASELINE = row([], tokens_per_s=100.0, baseline=True)  # no buckets of its own: the estimate


def test_the_answer_says_where_the_config_stops_paying():
    # 2.4 tokens per step at short contexts, 1.1 at 1-2k; 1.2x the baseline overall: the
    # break-even is (2.4 + 2.0 + 1.1) / 3 / 1.2 = 1.53 tokens per step, passed at 1024.
    note = context_note(row([(0, 2.4), (512, 2.0), (1024, 1.1)]), baseline=BASELINE, noise=0.05)
    assert note == ("eagle3 k=3's tokens per step at concurrency 1 fall with the context: 2.40 at "
                    "0-255 tokens, 1.10 at 1024-2047; from about 1024 tokens of context it stops "
                    "paying (below the estimated break-even of 1.53 tokens per step)")
    held = context_note(row([(0, 2.4), (512, 2.35)]), baseline=BASELINE, noise=0.05)
    assert held is None
    pays = context_note(row([(0, 2.4), (512, 2.0)], tokens_per_s=200.0), baseline=BASELINE, noise=0.05)
    assert pays.endswith("it still pays at every length measured (estimated break-even 1.10)")


def test_where_the_baseline_was_timed_at_the_same_lengths_the_answer_is_measured():
    baseline = row([(0, 1.0, 50.0), (512, 1.0, 40.0), (1024, 1.0, 30.0)], tokens_per_s=100.0, baseline=True)
    config = row([(0, 2.4, 110.0), (512, 2.0, 70.0), (1024, 1.1, 27.0)])
    assert context_note(config, baseline=baseline, noise=0.05) == (
        "eagle3 k=3's tokens per step at concurrency 1 fall with the context: 2.40 at 0-255 tokens, 1.10 at "
        "1024-2047; from about 1024 tokens of context it stops paying (its decode rate per request against "
        "the baseline's at the same lengths: 2.20x at 0-255, 1.75x at 512-1023, 0.90x at 1024-2047)")
    pays = row([(0, 2.4, 110.0), (512, 2.0, 70.0), (1024, 1.5, 33.0)])
    assert context_note(pays, baseline=baseline, noise=0.05).endswith(
        "it still pays at every length measured (its decode rate per request against the baseline's: "
        "2.20x at 0-255, 1.75x at 512-1023, 1.10x at 1024-2047)")


def test_each_bucket_s_decode_rate_is_its_tokens_over_the_time_between_chunks():
    timed = RequestSteps("a", tokens=(3, 3, 1), contexts=(10, 13, 600), seconds=(0.02, 0.04, 0.05))
    untimed = RequestSteps("b", tokens=(2,), contexts=(20,))
    short, long = by_context([timed])
    assert short["tokens_per_s"] == 6 / 0.06 and long["tokens_per_s"] == 1 / 0.05
    assert "tokens_per_s" not in by_context([timed, untimed])[0]  # a step without its time: no rate
    # From a result: the chunks' arrival times, the first (the prefill's) starting the clock.
    from tuner.replay.acceptance import request_steps
    result = RequestResult("r", 0.0, ok=True, ttft_s=0.1, e2e_s=0.3, output_tokens=5, prompt_tokens=10,
                           chunk_tokens=(1, 3, 1), chunk_at=(0.1, 0.15, 0.3))
    steps = request_steps(result)
    assert steps.tokens == (3, 1) and steps.contexts == (11, 14)
    assert [round(s, 6) for s in steps.seconds] == [0.05, 0.15]


def requests(*prompt_chars: int) -> list[Request]:
    return [Request(line=i + 1, prompt="x" * n, max_tokens=16) for i, n in enumerate(prompt_chars)]


def test_the_context_mix_and_a_sample_that_leaves_out_the_long_part():
    full = requests(*([100] * 6 + [4000] * 4))  # 25+16 and 1000+16 tokens (characters / 4)
    assert context_lengths(full)[:1] == [41] and context_lengths(full)[-1] == 1016
    assert [(b["from"], b["requests"]) for b in context_mix(context_lengths(full))] == [(0, 6), (512, 4)]
    assert left_out(full, full[:8]) is None
    warning = left_out(full, full[:6])
    assert warning.startswith("warning: the replayed requests leave out part of the workload's "
                              "context-length mix: 512-1023 tokens (40%) of its 10 requests")


def test_workload_sample_warns_when_it_drops_the_long_part(tmp_path):
    path = tmp_path / "mixed.jsonl"
    lines = [f'{{"prompt": "{"s" * 100}", "max_tokens": 8}}'] * 17 + [f'{{"prompt": "{"l" * 4000}", "max_tokens": 8}}'] * 3
    path.write_text("\n".join(lines) + "\n")
    result = subprocess.run([sys.executable, "-m", "tuner.cli", "workload", "sample", str(path), "--n", "2",
                             "--out", str(tmp_path / "sample.jsonl")], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert "1 of 20 requests" not in result.stdout and "2 of 20 requests" in result.stdout
    assert ("warning: the sample's requests leave out part of the workload's context-length mix: "
            "512-1023 tokens (15%) of its 20 requests") in " ".join(result.stderr.split())
    stats = subprocess.run([sys.executable, "-m", "tuner.cli", "workload", "stats", str(path)],
                           capture_output=True, text=True, timeout=180)
    assert "0-255: 17 (85%)" in stats.stdout and "512-1023: 3 (15%)" in stats.stdout


def test_no_context_note_from_streams_that_did_not_add_up():
    from dataclasses import replace

    marked = replace(row([(0, 2.4), (512, 2.0), (1024, 1.1)]), marks=(ACCEPTANCE_DISAGREES,))
    assert context_note(marked, baseline=BASELINE, noise=0.05) is None
