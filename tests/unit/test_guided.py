"""The step-cost model, the guided search's proposals, latency targets and k schedules
(pure functions; the study loop runs them in test_study_loop.py, the real server in integration)."""

import pytest

from tuner.errors import UsageError
from tuner.replay import LoadSpec
from tuner.search.guided import GuidedSearch, key_of, observation
from tuner.search.predict import PRIOR_MODEL_ERROR, Observation, StepCostModel
from tuner.search.schedule import batch_ranges
from tuner.search.slo import parse_slo
from tuner.search.space import SearchSpace

PROFILE = (0.8, 0.6, 0.45, 0.3, 0.2, 0.1)


def tps(k, c=0.1, base=100.0):
    return base * (1 + sum(PROFILE[:k])) / (1 + c * k)


def test_one_run_at_high_k_predicts_every_smaller_k_with_growing_uncertainty():
    model = StepCostModel([Observation("d", 0, 100.0), Observation("d", 6, tps(6), PROFILE)])
    assert model.step_costs("d") == pytest.approx((0.0, 0.1))
    assert model.model_error == PRIOR_MODEL_ERROR  # one trial per drafter: nothing to learn from yet
    predictions = [model.predict("d", k) for k in range(1, 7)]
    assert [p.tokens_per_s for p in predictions] == pytest.approx([tps(k) for k in range(1, 7)])
    sigmas = [p.sigma / p.tokens_per_s for p in predictions]
    assert sigmas == sorted(sigmas, reverse=True) and sigmas[-1] == 0  # farther from k=6, less sure
    assert model.predict("d", 7) is None and model.predict("other", 2) is None


def test_model_error_is_learned_from_the_trials_it_got_wrong():
    # A step cost that is not linear in k: the trial at k=2 is slower than the line through k=6 says.
    observed = [Observation("d", 0, 100.0), Observation("d", 6, tps(6), PROFILE),
                Observation("d", 2, tps(2) * 0.8, PROFILE[:2])]
    model = StepCostModel(observed)
    assert model.model_error > PRIOR_MODEL_ERROR  # 20 % off at a third of the way: worse than the prior


def test_guided_order_baseline_then_highest_k_per_drafter_then_the_most_promising():
    space = SearchSpace(methods=("ngram", "draft_model"), ks=(1, 2, 3, 4, 5, 6),
                        drafts={"draft_model": ("a",)})
    candidates = space.candidates()
    search = GuidedSearch(candidates, noise=0.02)
    measured = {}
    order = []
    world = {"ngram": 0.02, "draft_model": 0.1}
    for _ in range(len(candidates)):
        proposal = search.propose(measured)
        if proposal is None:
            break
        params = proposal.candidate.params
        order.append(proposal.candidate.label)
        k = params.get(f"{params['method']}.k", 0)
        cost = world.get(params["method"], 0)
        measured[key_of(params)] = observation(params, tps(k, cost), PROFILE[:k] if k else None)
    assert order[:3] == ["baseline", "ngram k=6", "draft_model k=6 draft=a"]
    assert len(order) < len(candidates)
    best = max(tps(k, c) for c in world.values() for k in range(7))
    found = max(o.tokens_per_s for o in measured.values())
    assert found >= best / 1.02


def test_a_failed_drafter_is_not_proposed_again():
    space = SearchSpace(methods=("draft_model",), ks=(1, 2, 3), drafts={"draft_model": ("a",)})
    candidates = space.candidates()
    search = GuidedSearch(candidates, noise=0.02)
    measured = {key_of(candidates[0].params): Observation("x", 0, 100.0),
                key_of(candidates[3].params): None}  # k=3 failed to start
    assert search.propose(measured) is None


def test_slo_parsing_and_refusal():
    slo = parse_slo("tpot_p99_ms<=40")
    assert (slo.metric, slo.limit_s) == ("tpot_p99", 0.04)
    assert parse_slo(" ttft_p99_s <= 0.5 ").limit_s == 0.5
    for bad in ("tpot<=40", "tpot_p99_ms<40", "itl_p99_ms<=3", "tpot_p90_ms<=5x"):
        with pytest.raises(UsageError, match="--slo"):
            parse_slo(bad)


def test_batch_ranges_split_at_geometric_midpoints_and_merge_equal_ks():
    assert batch_ranges([1, 4, 16, 64], [5, 3, 3, 0]) == ((1, 2, 5), (3, 32, 3), (33, 64, 0))
    assert batch_ranges([1, 4], [2, 2]) == ((1, 4, 2),)
    assert LoadSpec("concurrency", 4).label == "concurrency 4"
