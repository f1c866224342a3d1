"""The study's live view and the answer text, rendered to a recording console."""

from datetime import datetime, timezone

from rich.console import Console

from dataclasses import replace

from tuner.outputs.report import StudyProgressView, k_by_batch_size_text, trials_table, verdict_text
from tuner.replay import LoadSpec
from tuner.decide.k_by_batch_size import best_single, k_by_batch_size_beats_single, tune_k_by_batch_size
from tuner.study.loop import StudyOutcome, _k_by_batch_size_record
from tuner.decide.slo import parse_slos
from tuner.decide.verdict import StudyRules, study_verdict
from tuner.store import TrialRow


def row(number, config, tokens_per_s, status="complete", cause=None, load="concurrency 1"):
    return TrialRow(study_name="m | code | concurrency 1", model="m", workload_type="code",
                    load=load, optuna_trial_number=number, config=config,
                    label="baseline" if config is None else f"ngram k={config['num_speculative_tokens']}",
                    status=status, failure_cause=cause, server_log_path=None, tokens_per_s=tokens_per_s,
                    tpot_p50_s=0.002 if tokens_per_s else None, ttft_p50_s=0.01,
                    acceptance_rate=0.5 if config and tokens_per_s else None,
                    mean_acceptance_length=2.0 if config and tokens_per_s else None,
                    per_position=[0.6, 0.4] if config and tokens_per_s else None,
                    finished_at=datetime(2026, 11, 30, tzinfo=timezone.utc), vllm_version="0.32.0",
                    host="h", server_args=[])


def test_live_view_shows_finished_trials_with_their_ratio():
    console = Console(record=True, width=140, force_terminal=False)
    ngram = {"method": "ngram", "num_speculative_tokens": 2}
    with StudyProgressView(console) as view:
        view.trial_started(0, "baseline", 0, 3)
        view.trial_finished(row(0, None, 100.0))
        view.trial_started(1, "ngram k=2", 1, 3)
        view.trial_finished(row(1, ngram, 150.0))
        view.trial_finished(row(2, {"method": "ngram", "num_speculative_tokens": 4}, None,
                                "failed", "server exited"))
    text = console.export_text()
    assert "trial 1 (2/3 at most): ngram k=2" in text
    assert "1.50x" in text and "0.60 0.40" in text
    assert "failed ngram k=4: server exited" in text


def test_answer_text_ends_with_the_deploy_command():
    rows = [row(0, None, 100.0), row(1, {"method": "ngram", "num_speculative_tokens": 2}, 150.0)]
    console = Console(record=True, width=200)
    console.print(trials_table(rows))
    console.print(verdict_text(study_verdict(rows)))
    text = console.export_text()
    assert "answer: ngram k=2: 1.50x the baseline's output tokens/s" in text
    assert text.rstrip().endswith(
        "vllm serve m --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 2}'")


def _k_six_then_two():
    """Two loads where ngram k=6 wins at 1 and k=2 at 16: (loads, rows)."""
    k = {n: {"method": "ngram", "num_speculative_tokens": n} for n in (2, 6)}
    loads = (LoadSpec("concurrency", 1), LoadSpec("concurrency", 16))
    c1, c16 = (load.label for load in loads)
    return loads, [row(0, None, 100.0, load=c1), row(0, None, 400.0, load=c16),
                   row(1, k[6], 180.0, load=c1), row(1, k[6], 420.0, load=c16),
                   row(2, k[2], 150.0, load=c1), row(2, k[2], 520.0, load=c16)]


def test_a_k_by_batch_size_measured_slower_than_the_best_single_config_is_not_the_one_deployed():
    loads, rows = _k_six_then_two()
    k_by_batch_size = tune_k_by_batch_size(rows, loads, noise=0.02)
    assert [level.k for level in k_by_batch_size.levels] == [6, 2]
    single = [rows[4], rows[5]]  # k=2: the higher geometric mean over both levels
    measured = [replace(rows[2], config=k_by_batch_size.config(), tokens_per_s=185.0),
                replace(rows[5], config=k_by_batch_size.config(), tokens_per_s=515.0)]
    slower = [replace(r, tokens_per_s=r.tokens_per_s * 0.7) for r in measured]
    assert best_single(rows, loads, max_output_change=0.0) == single
    faster_text = _render(k_by_batch_size, single, [replace(r, kind="k_by_batch_size") for r in measured], rows)
    assert "num_speculative_tokens_per_batch_size" in faster_text.splitlines()[-1]
    assert "k by batch size 185.0 tok/s (1.85x)" in faster_text
    assert k_by_batch_size_beats_single(slower, single) is False
    text = _render(k_by_batch_size, single, [replace(r, kind="k_by_batch_size") for r in slower], rows)
    assert "the k-by-batch-size schedule was not faster than the best single config (ngram k=2)" in text
    assert "; the k-by-batch-size schedule was not faster beyond the noise" in text  # the verdict says why
    assert text.splitlines()[-1].strip() == (
        """vllm serve m --speculative-config '{"method": "ngram", "num_speculative_tokens": 2}'""")


def test_a_faster_k_by_batch_size_is_deployed_only_under_the_study_s_rules():
    loads, rows = _k_six_then_two()
    rows = [replace(r, greedy_match_rate=1.0 if r.config else None, tpot_p99_s=0.01) for r in rows]
    k_by_batch_size = tune_k_by_batch_size(rows, loads, noise=0.02)
    single = [rows[4], rows[5]]
    measured = [replace(r, kind="k_by_batch_size", config=k_by_batch_size.config(), tokens_per_s=t)
                for r, t in ((rows[2], 185.0), (rows[5], 515.0))]

    def verdict(measured, slos=()):
        rules = StudyRules(slos=slos, k_by_batch_size=_k_by_batch_size_record(k_by_batch_size, measured, single))
        return study_verdict(rows + measured, rules, noise=0.02)

    assert verdict(measured).kind == "k_by_batch_size"
    # Its own server changed greedy output at one load: the best single config is deployed.
    changed = [measured[0], replace(measured[1], greedy_match_rate=0.5)]
    assert verdict(changed).kind == "config" and verdict(changed).label == "ngram k=2"
    assert "changed greedy output" in verdict(changed).headline
    # Its TPOT p99 breaks the study's target, which every single config met.
    slow = [replace(r, tpot_p99_s=0.05) for r in measured]
    target = parse_slos(["tpot_p99_ms<=40"])
    assert verdict(slow, target).kind == "config"
    assert verdict([replace(r, tpot_p99_s=0.01) for r in measured], target).kind == "k_by_batch_size"


def _render(k_by_batch_size, single, measured, rows) -> str:
    """The k by batch size's figures and the verdict, as `tuner optimize` prints them at the end."""
    rules = StudyRules(k_by_batch_size=_k_by_batch_size_record(k_by_batch_size, measured, single))
    verdict = study_verdict(rows + measured, rules, noise=0.02)
    console = Console(record=True, width=300)
    console.print(k_by_batch_size_text(StudyOutcome("s", {}, single, k_by_batch_size, measured, 5, verdict)))
    console.print(verdict_text(verdict))
    return console.export_text()


def test_the_trials_table_shows_each_start_and_its_share_of_the_trial():
    console = Console(record=True, width=220, force_terminal=False)
    baseline = replace(row(0, None, 100.0), startup_s=56.4, trial_s=70.0)
    console.print(trials_table([baseline, row(1, {"method": "ngram", "num_speculative_tokens": 2}, 150.0)]))
    text = console.export_text()
    assert "start (share)" in text and "56 s (81%)" in text


def test_over_several_loads_the_prediction_of_the_geometric_mean_shows_once_per_trial():
    spec = {"method": "ngram", "num_speculative_tokens": 2}
    rows = [row(0, None, 100.0, load="concurrency 1"), row(0, None, 400.0, load="concurrency 8"),
            *[replace(row(1, spec, tps, load=load), predicted_tokens_per_s=321.0, predicted_sigma=12.0)
              for tps, load in ((150.0, "concurrency 1"), (600.0, "concurrency 8"))]]
    console = Console(record=True, width=220, force_terminal=False)
    console.print(trials_table(rows))
    text = console.export_text()
    assert text.count("321±12") == 1  # on the trial's first row only, not beside each load's figure
    assert "(+7%)" in text  # against the geometric mean of 150 and 600 (300), not either load
    assert "predicted: of the geometric mean over the loads" in text


def test_the_k_by_batch_size_text_says_how_many_tokens_the_server_drafted_at_each_load():
    ngram = {"method": "ngram", "num_speculative_tokens": 4}
    loads = [LoadSpec("concurrency", 1), LoadSpec("concurrency", 8)]
    rows = [row(0, None, 100.0, load="concurrency 1"), row(0, None, 500.0, load="concurrency 8"),
            row(1, ngram, 180.0, load="concurrency 1"), row(1, ngram, 510.0, load="concurrency 8")]
    k_by_batch_size = tune_k_by_batch_size(rows, loads)
    config = k_by_batch_size.config()
    measured = [replace(row(-1, config, 181.0, load="concurrency 1"), drafts=10, draft_tokens=40),
                replace(row(-1, config, 505.0, load="concurrency 8"), drafts=10, draft_tokens=0)]
    outcome = StudyOutcome("s", {}, best_single(rows, loads), k_by_batch_size, measured, 3, None)
    text = k_by_batch_size_text(outcome)
    assert "server drafted 4.00 tokens per draft" in text and "server drafted 0.00 tokens per draft" in text
    assert _k_by_batch_size_record(k_by_batch_size, measured, None)["k_applied"] == {
        "concurrency 1": 4.0, "concurrency 8": 0.0}


def test_a_failed_trial_over_several_loads_is_no_load_level_of_its_own():
    # Found on the H200: a trial over c1 and c8 that failed has no figures and is stored under
    # the combined label; the verdict then asked for a baseline at 'concurrency 1,8'.
    ngram = {"method": "ngram", "num_speculative_tokens": 2}
    rows = [row(0, None, 100.0, load="concurrency 1"), row(0, None, 500.0, load="concurrency 8"),
            row(1, ngram, 180.0, load="concurrency 1"), row(1, ngram, 600.0, load="concurrency 8"),
            row(2, {**ngram, "num_speculative_tokens": 4}, None, "failed", "server exited", load="concurrency 1,8")]
    verdict = study_verdict(rows, StudyRules(), 0.05)
    assert list(verdict.answers) == ["concurrency 1", "concurrency 8"]
    assert verdict.label == "ngram k=2"


def test_the_one_config_over_the_loads_is_decided_by_the_same_rule_as_each_load():
    """Over several loads the single config is chosen as at one load: configs shown equal over
    the loads go to the smaller k, and ones neither separated nor shown equal leave the verdict
    undecided, said in its headline, instead of taking the higher geometric mean silently."""
    k = {n: {"method": "ngram", "num_speculative_tokens": n} for n in (2, 4)}
    c1, c8 = "concurrency 1", "concurrency 8"

    def replayed(r, mad, n=4):
        return replace(r, repeats=n, tokens_per_s_mad=mad)

    base = [replayed(row(0, None, 100.0, load=c1), 0.5), replayed(row(0, None, 400.0, load=c8), 2.0)]
    # Steady replays, k=4 0.5 % above k=2 at both loads: shown equal, so k=2.
    steady = base + [replayed(row(1, k[4], 150.6, load=c1), 0.5), replayed(row(1, k[4], 602.4, load=c8), 2.0),
                     replayed(row(2, k[2], 149.8, load=c1), 0.5), replayed(row(2, k[2], 599.2, load=c8), 2.0)]
    verdict = study_verdict(steady)
    assert verdict.label == "ngram k=2" and "undecided" not in verdict.headline
    # Spread replays (MAD 4 %) of the same medians: neither separated nor shown equal.
    spread = [replayed(r, r.tokens_per_s * 0.04) if r.config else r for r in steady]
    verdict = study_verdict(spread)
    assert verdict.label == "ngram k=4"
    assert ("undecided between ngram k=4 and ngram k=2 over concurrency 1,concurrency 8 (neither "
            "separated nor shown equal") in verdict.headline
