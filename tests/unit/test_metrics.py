"""Acceptance from counter deltas, on /metrics text captured from a real vLLM 0.32 CPU server
(ngram k=3): the 'before' scrape after 2 warm-up requests, 'after' after 8 more."""

from pathlib import Path

import pytest

from tuner.errors import MetricsError
from tuner.metrics import SpecCounters, acceptance_between, parse_counters

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def scrapes():
    before = parse_counters((DATA / "metrics_before.txt").read_text())
    after = parse_counters((DATA / "metrics_after.txt").read_text())
    return before, after


def test_parses_the_real_counters(scrapes):
    _, after = scrapes
    assert after.spec_present
    assert after.drafts == 86
    assert after.draft_tokens == 238
    assert after.accepted == 204
    assert after.accepted_per_pos == {0: 78, 1: 72, 2: 54}
    assert after.generation_tokens == 436


def test_deltas_give_the_acceptance_figures(scrapes):
    before, after = scrapes
    a = acceptance_between(before, after, k=3)
    drafts = after.drafts - before.drafts
    accepted = after.accepted - before.accepted
    draft_tokens = after.draft_tokens - before.draft_tokens
    assert a.drafts == drafts > 0
    assert a.acceptance_rate == pytest.approx(accepted / draft_tokens)
    assert a.mean_acceptance_length == pytest.approx(1 + accepted / drafts)
    per_pos = [(after.accepted_per_pos[i] - before.accepted_per_pos.get(i, 0)) / drafts for i in range(3)]
    assert list(a.per_position) == pytest.approx(per_pos)
    # p_i are unconditional, so they never increase and sum to the accepted tokens per draft.
    assert all(x >= y for x, y in zip(a.per_position, a.per_position[1:]))
    assert sum(a.per_position) == pytest.approx(accepted / drafts)
    assert a.acceptance_length_at(1) == pytest.approx(1 + per_pos[0])


def test_no_spec_series_means_no_acceptance():
    text = '# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total{engine="0"} 5.0\n'
    counters = parse_counters(text)
    assert not counters.spec_present
    assert counters.generation_tokens == 5
    assert acceptance_between(SpecCounters(), counters) is None


def test_positions_missing_before_count_as_zero_and_pad_to_k():
    before = SpecCounters(drafts=0, spec_present=True)
    after = SpecCounters(drafts=10, draft_tokens=40, accepted=6, accepted_per_pos={0: 5, 1: 1},
                         spec_present=True)
    a = acceptance_between(before, after, k=4)
    assert a.per_position == pytest.approx((0.5, 0.1, 0.0, 0.0))


def test_sums_over_engines():
    text = (
        '# TYPE vllm:spec_decode_num_drafts counter\n'
        'vllm:spec_decode_num_drafts_total{engine="0"} 3.0\n'
        'vllm:spec_decode_num_drafts_total{engine="1"} 4.0\n'
    )
    assert parse_counters(text).drafts == 7


def test_garbage_is_a_metrics_error():
    with pytest.raises(MetricsError):
        parse_counters("vllm:spec_decode_num_drafts_total{engine= 1 2 3\n")
