from datetime import datetime, timezone

import pytest

from tuner.errors import TunerError, UsageError
from tuner.plan.space import SearchSpace, drafts_by_method, parse_ks
from tuner.decide.answer import choose
from tuner.store import TrialRow


def test_parse_ks():
    assert parse_ks("1-3,6") == (1, 2, 3, 6)
    assert parse_ks("4, 2") == (2, 4)
    for bad in ("0-2", "a", ""):
        with pytest.raises(UsageError):
            parse_ks(bad)


def test_candidates_are_conditional_and_baseline_first():
    space = SearchSpace(methods=("ngram", "draft_model", "dflash"), ks=(2, 4),
                        drafts={"draft_model": ("/d1", "/d2"), "dflash": ("/df",)},
                        fixed_k={"dflash": 7}, ngram_lookup=((2, 4),))
    found = space.candidates()
    assert found[0].spec is None and found[0].params == {"method": "off"}
    labels = [c.label for c in found]
    assert labels[1:3] == ["ngram k=2", "ngram k=4"]
    assert sum(1 for c in found if c.params["method"] == "draft_model") == 4  # 2 drafts x 2 ks
    (dflash,) = [c for c in found if c.params["method"] == "dflash"]
    assert dflash.spec.k == 7  # not swept: fixed by the checkpoint
    assert found[1].spec.to_vllm() == {"method": "ngram", "num_speculative_tokens": 2,
                                       "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    assert "ngram.k" not in found[3].params and "draft_model.k" in found[3].params


def test_space_refuses_what_cannot_work():
    with pytest.raises(UsageError, match="needs a draft checkpoint"):
        SearchSpace(methods=("draft_model",))
    with pytest.raises(UsageError, match="fixed by the checkpoint"):
        SearchSpace(methods=("dflash",), drafts={"dflash": ("/x",)})


def test_drafts_by_method():
    assert drafts_by_method(("ngram", "draft_model"), ["org/a"]) == {"draft_model": ("org/a",)}
    assert drafts_by_method(("draft_model", "eagle3"), ["eagle3=/e"]) == {"eagle3": ("/e",)}
    with pytest.raises(UsageError, match="say which method"):
        drafts_by_method(("draft_model", "eagle3"), ["org/a"])


def row(config, tokens_per_s, status="complete", tpot=0.01):
    return TrialRow(study_name="s", model="m", workload_type="code", load="concurrency 1",
                    optuna_trial_number=0, config=config, label=str(config), status=status,
                    failure_cause=None, server_log_path=None, tokens_per_s=tokens_per_s,
                    tpot_p50_s=tpot, ttft_p50_s=0.1, acceptance_rate=None, mean_acceptance_length=None,
                    per_position=None, finished_at=datetime.now(timezone.utc), vllm_version="0.32.0",
                    host="h", server_args=["--max-model-len=1024"])


def test_winner_must_beat_the_noise():
    ngram = {"method": "ngram", "num_speculative_tokens": 2}
    answer = choose([row(None, 100), row(ngram, 130, tpot=0.008), row({"method": "x"}, None, "failed")])
    assert answer.speedup == pytest.approx(1.3)
    assert not answer.keep_speculation_off and answer.winner.config == ngram
    assert answer.tpot_change == pytest.approx(-0.2)
    within_noise = choose([row(None, 100), row(ngram, 104)], noise=0.05)
    assert within_noise.keep_speculation_off and within_noise.winner.config is None
    assert within_noise.verdict.endswith("gives 1.04x the baseline's tokens/s, within the noise (5% plus the "
                                         "runs' spread)")
    # A config slower than the baseline is not "within the noise" of it: it is slower.
    slower = choose([row(None, 100), row(ngram, 68)], noise=0.05)
    assert slower.verdict.endswith("gives 0.68x the baseline's tokens/s, slower than without speculation")
    with pytest.raises(TunerError, match="no completed baseline"):
        choose([row(ngram, 100)])


def test_configs_shown_equal_go_to_the_smaller_k_and_the_rest_are_undecided():
    from dataclasses import replace

    k2 = {"method": "ngram", "num_speculative_tokens": 2}
    k4 = {"method": "ngram", "num_speculative_tokens": 4}
    base = replace(row(None, 100), repeats=4, tokens_per_s_mad=0.5)
    # Four steady replays each: 139 and 140 are shown equal within 2 % (0.7 % apart, their
    # difference known to +-0.5 %), so the smaller k wins.
    two, four = (replace(row(k2, 139), repeats=4, tokens_per_s_mad=0.5),
                 replace(row(k4, 140), repeats=4, tokens_per_s_mad=0.5))
    answer = choose([base, two, four], noise=0.02)
    assert answer.best.config == k4  # the highest score...
    assert answer.winner.config == k2 and not answer.undecided  # ...but shown equal to k=2, the smaller
    assert answer.speedup == pytest.approx(1.39)
    # One replay each shows nothing equal: the top one wins, and the answer says it is undecided
    # instead of picking the smaller k.
    once = choose([row(None, 100), row(k2, 139), row(k4, 140)], noise=0.02)
    assert once.winner.config == k4 and [r.config for r in once.undecided] == [k2]
    assert once.verdict == ("{'method': 'ngram', 'num_speculative_tokens': 4}: 1.40x the baseline's output "
                            "tokens/s; undecided between {'method': 'ngram', 'num_speculative_tokens': 4} and "
                            "{'method': 'ngram', 'num_speculative_tokens': 2} at this load (neither separated nor "
                            "shown equal within the noise: more replays decide, --max-repeats, and a second start of "
                            "each where --trials leaves room)")
    # Noisy replays of each (MAD 3 %) neither separate 139 from 140 nor show them equal.
    noisy = choose([base, replace(two, tokens_per_s_mad=4.0), replace(four, tokens_per_s_mad=4.0)], noise=0.02)
    assert noisy.winner.config == k4 and len(noisy.undecided) == 1
    # Well apart, 130 against 140, they are separated: no contender.
    apart = choose([base, replace(two, tokens_per_s=130.0), four], noise=0.02)
    assert apart.winner.config == k4 and not apart.undecided


def test_relative_precision_and_the_replays_it_asks_for():
    from dataclasses import replace

    from tuner.decide.stats import relative_precision
    from tuner.measure.trial import MeasureSettings, enough_replays

    assert relative_precision([100.0]) == float("inf")
    assert relative_precision([100.0, 102.0, 98.0]) == pytest.approx(4.303 * 2.0 / 3 ** 0.5 / 100)
    fixed = MeasureSettings(repeats=2)
    assert not enough_replays([100.0], fixed) and enough_replays([100.0, 150.0], fixed)
    until = MeasureSettings(repeats=1, max_repeats=5, precision=0.02)
    assert not enough_replays([100.0], until)  # one replay says nothing of its precision
    assert enough_replays([100.0, 100.2], until)  # +-1.3 % (t with 1 degree of freedom: 12.7)
    assert not enough_replays([100.0, 100.5], until)  # +-3.2 %
    assert not enough_replays([100.0, 110.0, 95.0], until)
    assert enough_replays([100.0, 110.0, 95.0, 105.0, 90.0], until)  # the cap
    with pytest.raises(UsageError, match="--max-repeats must be >= --repeats"):
        MeasureSettings(repeats=3, max_repeats=2)
    # Out of reach: the best so far needs 300 tok/s at concurrency 1. Replays of 100 and 110
    # (mean 105, +-60 % at 95 %: at most 169) cannot get there, so two suffice there; at a
    # load with no best yet, or one whose bar the interval reaches, precision still decides.
    reach = replace(until, out_of_reach={"concurrency 1": 300.0, "concurrency 8": 150.0})
    assert enough_replays([100.0, 110.0], reach, "concurrency 1")
    assert not enough_replays([100.0, 110.0], reach, "concurrency 8")  # 169 > 150: a contender
    assert not enough_replays([100.0, 110.0], reach, "concurrency 32")
    assert not enough_replays([100.0, 110.0], reach)
    assert not enough_replays([100.0], reach, "concurrency 1")  # one replay has no interval


def test_requests_per_client_sizes_each_load_s_replay(tmp_path):
    from tuner.replay import LoadSpec
    from tuner.measure.trial import MeasureSettings
    from tuner.workload import load_workload

    path = tmp_path / "w.jsonl"
    path.write_text("".join(f'{{"id": "r{i}", "prompt": "p{i}"}}\n' for i in range(40)))
    workload = load_workload(path, "code")
    every = MeasureSettings()
    assert every.replayed(workload, LoadSpec("concurrency", 1)) is workload
    sized = MeasureSettings(requests_per_client=4)
    assert [r.id for r in sized.replayed(workload, LoadSpec("concurrency", 1)).requests] == ["r0", "r1", "r2", "r3"]
    assert len(sized.replayed(workload, LoadSpec("concurrency", 8)).requests) == 32
    assert sized.replayed(workload, LoadSpec("concurrency", 16)) is workload  # 64 > 40: all of it
    assert sized.replayed(workload, LoadSpec("rate", 1, 2.0)) is workload  # no clients in an open loop
    with pytest.raises(UsageError, match="--requests-per-client must be >= 1"):
        MeasureSettings(requests_per_client=0)


def test_a_steady_config_beats_a_noisy_one_with_the_same_median():
    from dataclasses import replace

    k4 = {"method": "ngram", "num_speculative_tokens": 4}
    k3 = {"method": "ngram", "num_speculative_tokens": 3}
    noisy = replace(row(k4, 150), repeats=3, tokens_per_s_mad=40.0)
    steady = replace(row(k3, 140), repeats=3, tokens_per_s_mad=1.0)
    answer = choose([row(None, 100), noisy, steady], noise=0.0)
    assert answer.best.config == k3  # score 139 against 110
    assert answer.winner.config == k3
    # The spread makes them tied; the smaller k would win a tie anyway, never the noisy k=4.
    assert answer.speedup == pytest.approx(1.4)


def test_output_check_locates_the_first_different_token():
    from tuner.replay import RequestResult
    from tuner.decide.output_check import BaselineOutputs, compare_outputs, worst

    def req(i, digest, tokens=None, greedy=True):
        return RequestResult(f"r{i}", 0.0, ok=True, text_digest=digest, greedy=greedy, output_tokens=3,
                             token_ids=tokens)

    baseline = BaselineOutputs({"r0": "a", "r1": "b", "r2": "c"}, {"r1": [5, 6, 7, 8]})
    check = compare_outputs(baseline, [req(0, "a"), req(1, "x", (5, 6, 9, 8)), req(2, "c"), req(3, "d")])
    assert check.match_rate == pytest.approx(2 / 3) and check.compared == 3
    # Without the baseline's margins a divergence is a real change.
    assert check.first_divergence == {"request": "r1", "token": 2, "margin": None, "near_tie": False}
    assert check.near_tie_rate == 0 and check.change_rate == pytest.approx(1 / 3)
    assert compare_outputs(baseline, [req(0, "z", greedy=False)]) is None
    same = compare_outputs(baseline, [req(0, "a")])
    # The trial's figure is its worst run's, with the run it came from.
    trial = worst([same, check])
    assert trial.match_rate == pytest.approx(2 / 3)
    assert trial.first_divergence == {"request": "r1", "token": 2, "margin": None, "near_tie": False, "run": 1}


def test_a_divergence_at_the_baselines_own_near_tie_is_not_a_change():
    """Where the baseline's top two candidates were 0.02 apart in log-probability, a config that
    took the other one flipped a numeric near-tie; at a lead of 3.0 it changed the output."""
    from tuner.replay import RequestResult
    from tuner.decide.output_check import BaselineOutputs, compare_outputs, output_changed, worst

    def req(i, digest, tokens):
        return RequestResult(f"r{i}", 0.0, ok=True, text_digest=digest, greedy=True, output_tokens=3,
                             token_ids=tokens)

    baseline = BaselineOutputs({"r0": "a", "r1": "b"}, {"r0": [1, 2, 3], "r1": [4, 5, 6]},
                               {"r0": [2.5, 0.02, 1.0], "r1": [3.0, 3.0, 3.0]})
    tie_only = compare_outputs(baseline, [req(0, "x", (1, 9, 3)), req(1, "b", (4, 5, 6))])
    assert tie_only.match_rate == 0.5 and tie_only.near_tie_rate == 0.5 and tie_only.change_rate == 0
    assert tie_only.first_divergence == {"request": "r0", "token": 1, "margin": 0.02, "near_tie": True}
    assert not output_changed(tie_only.change_rate, 0.0)
    both = compare_outputs(baseline, [req(0, "x", (1, 9, 3)), req(1, "y", (4, 5, 7))])
    assert both.near_tie_rate == 0.5 and both.change_rate == 0.5
    # The real change is the one shown, and the worse run is the one with real changes.
    assert both.first_divergence == {"request": "r1", "token": 2, "margin": 3.0, "near_tie": False}
    assert worst([both, tie_only]).first_divergence["run"] == 0
    # --near-tie-margin 0 counts every divergence.
    strict = compare_outputs(baseline, [req(0, "x", (1, 9, 3)), req(1, "b", (4, 5, 6))], near_tie_margin=0)
    assert strict.near_tie_rate == 0 and strict.change_rate == 0.5


def test_the_reference_pass_keeps_its_lead_where_it_parts_from_the_measured_run():
    """The baseline's own reference pass can flip a tie the measured run took the other way: its
    margins hold up to and at the token where the two part (the same prefix led there), and none
    after it. Seen in CI: the demo's code-10 tie at token 3 was lost and counted as a change."""
    from tuner.replay import RequestResult
    from tuner.measure.trial import _aligned

    measured = [RequestResult("a", 0.0, ok=True, token_ids=(1, 2, 3, 4, 5)),
                RequestResult("b", 0.0, ok=True, token_ids=(1, 2))]
    reference = {"a": ((1, 2, 3, 9, 8), (2.0, 1.5, 1.0, 0.0, 0.7)), "b": ((1, 2), (0.5, None))}
    assert _aligned(reference, measured) == {"a": [2.0, 1.5, 1.0, 0.0], "b": [0.5, None]}


def test_top_two_margins_are_read_from_completion_and_chat_chunks():
    from tuner.replay.client import _top_margins

    completion = {"tokens": ["token_id:5", "token_id:6"], "token_logprobs": [-0.1, -0.7],
                  "top_logprobs": [{"token_id:5": -0.1, "token_id:9": -2.6}, {"token_id:6": -0.7, "token_id:7": -0.75}]}
    assert _top_margins(completion) == [pytest.approx(2.5), pytest.approx(0.05)]
    chat = {"content": [{"token": "token_id:5", "logprob": -0.1,
                         "top_logprobs": [{"token": "token_id:5", "logprob": -0.1},
                                          {"token": "token_id:9", "logprob": -1.1}]},
                        {"token": "token_id:6", "logprob": 0.0, "top_logprobs": [{"token": "token_id:6", "logprob": 0.0}]}]}
    assert _top_margins(chat) == [pytest.approx(1.0), None]
    assert _top_margins(None) == []


def test_the_starts_of_one_config_are_pooled_into_one_row_per_load():
    """A second start of a config (study._settle_undecided) is a second row of it at each load;
    the answer sees one, from every replay of both, with the worse greedy check of the two."""
    from dataclasses import replace

    from tuner.decide.answer import pooled

    k2 = {"method": "ngram", "num_speculative_tokens": 2}
    base = replace(row(None, 100), replays=(100.0, 100.0))
    first = replace(row(k2, 130), repeats=3, replays=(120.0, 140.0, 130.0), greedy_match_rate=1.0,
                    marks=("a",))
    second = replace(row(k2, 132), repeats=3, replays=(131.8, 132.0, 132.2), greedy_match_rate=0.5,
                     marks=("b",))
    once = replace(row(k2, 1), replays=(1.0,), load="concurrency 8")  # another load: its own
    rows = pooled([base, first, once, second])
    assert [r.load for r in rows] == ["concurrency 1", "concurrency 8", "concurrency 1"]
    both = rows[-1]
    assert both.starts == 2 and both.repeats == 6 and both.tokens_per_s == pytest.approx(131.9)
    assert both.tokens_per_s_mad == pytest.approx(1.4826 * 1.1)
    assert both.greedy_match_rate == 0.5 and both.marks == ("a", "b")
    assert rows[0] is base and rows[1] is once
    # Rows without stored replays (an older database) stay as they are.
    old = [row(k2, 130), row(k2, 132)]
    assert pooled(old) == old
    # choose() decides on the pooled row: a start that changed greedy output rules the config out.
    assert choose([base, first, replace(second, greedy_match_rate=1.0)], noise=0.02).winner.starts == 2
    assert choose([base, first, second], noise=0.02).output_changed[0].starts == 2
