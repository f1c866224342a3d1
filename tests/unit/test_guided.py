"""The step-cost model, the guided search's proposals, latency targets and k schedules
(pure functions; the study loop runs them in test_study_loop.py, the real server in integration)."""

import pytest

from tuner.errors import UsageError
from tuner.replay import LoadSpec
from tuner.search.guided import GuidedSearch, key_of, observation
from tuner.search.predict import Observation, StepCostModel
from tuner.search.schedule import batch_ranges
from tuner.search.slo import parse_slo
from tuner.search.space import SearchSpace

PROFILE = (0.8, 0.6, 0.45, 0.3, 0.2, 0.1)


def tps(k, c=0.1, base=100.0):
    return base * (1 + sum(PROFILE[:k])) / (1 + c * k)


def test_one_run_at_high_k_predicts_every_smaller_k_with_uncertainty_largest_mid_way():
    model = StepCostModel([Observation("d", 0, 100.0), Observation("d", 6, tps(6), PROFILE)])
    assert model.excess_step_times("d") == pytest.approx({6: 0.6})
    predictions = [model.predict("d", k) for k in range(1, 7)]
    # The line from (0, 0) through the one trial is this world's own step cost.
    assert [p.tokens_per_s for p in predictions] == pytest.approx([tps(k) for k in range(1, 7)])
    sigmas = [p.sigma / p.tokens_per_s for p in predictions]
    assert sigmas[-1] == 0 and max(sigmas) == sigmas[2] > sigmas[0] > 0  # widest at k=3, mid-way to 0
    assert model.predict("d", 7) is None and model.predict("other", 2) is None


def concave(k):
    """A step cost that flattens at high k, as ngram's does when its matches run out."""
    return 100.0 * (1 + sum(PROFILE[:k])) / (1.3 + 0.5 * k ** 0.5)


def test_three_trials_bend_the_interpolation_and_measure_its_uncertainty():
    trials = {k: Observation("d", k, concave(k), PROFILE[:k]) for k in (1, 3, 6)}
    baseline = Observation("d", 0, 100.0)
    straight = StepCostModel([baseline, trials[1], trials[6]])
    bent = StepCostModel([baseline, *trials.values()])
    assert straight.predict("d", 4).tokens_per_s / concave(4) - 1 > 0.02  # a line overshoots
    for k in (2, 4, 5):
        p = bent.predict("d", k)
        assert abs(p.tokens_per_s / concave(k) - 1) < 0.01
        assert 0 < p.sigma and p.upper(1.28) > concave(k)
    assert bent.predict("d", 3).sigma == 0


def test_a_straight_step_cost_is_predicted_exactly_once_three_trials_show_it():
    observed = [Observation("d", 0, 100.0)] + [Observation("d", k, tps(k, c=0.2), PROFILE[:k]) for k in (2, 4, 6)]
    model = StepCostModel(observed)
    for k in (1, 3, 5):
        assert model.predict("d", k).tokens_per_s == pytest.approx(tps(k, c=0.2))
        assert model.predict("d", k).sigma == pytest.approx(0, abs=1e-9)


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


def test_with_several_loads_the_best_k_of_each_load_is_measured():
    # Cheap steps at batch 1 (k=6 wins there), dear ones at batch 16 (k=2 or 3): the geometric
    # mean's best, k=4, is 4.7 % below batch 16's best.
    cost = {"c1": 0.02, "c16": 0.3}
    space = SearchSpace(methods=("ngram",), ks=(1, 2, 3, 4, 5, 6))
    candidates = space.candidates()
    search = GuidedSearch(candidates, noise=0.02)
    measured = {}
    while (proposal := search.propose(measured)) is not None:
        params = proposal.candidate.params
        k = params.get("ngram.k", 0)
        by_load = {load: tps(k, c) for load, c in cost.items()}
        geomean = (by_load["c1"] * by_load["c16"]) ** 0.5
        measured[key_of(params)] = observation(params, geomean, PROFILE[:k] if k else None, by_load=by_load)
    assert len(measured) < len(candidates)
    for load, c in cost.items():
        best = max(tps(k, c) for k in range(7))
        assert max(dict(o.by_load)[load] for o in measured.values()) >= best / 1.02, load


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
