"""The study's live view and the answer text, rendered to a recording console."""

from datetime import datetime, timezone

from rich.console import Console

from dataclasses import replace

from tuner.report import StudyProgressView, answer_text, schedule_text, trials_table
from tuner.replay import LoadSpec
from tuner.search import choose
from tuner.search.schedule import tune_schedule
from tuner.search.study import StudyOutcome
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
    answer = choose(rows)
    console = Console(record=True, width=200)
    console.print(trials_table(rows))
    console.print(answer_text(answer))
    text = console.export_text()
    assert "ngram k=2: 1.50x the baseline's output tokens/s" in text
    assert text.rstrip().endswith(
        "vllm serve m --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 2}'")


def test_a_schedule_measured_slower_than_the_best_single_config_is_not_the_one_deployed():
    k = {n: {"method": "ngram", "num_speculative_tokens": n} for n in (2, 6)}
    loads = (LoadSpec("concurrency", 1), LoadSpec("concurrency", 16))
    c1, c16 = (load.label for load in loads)
    rows = [row(0, None, 100.0, load=c1), row(0, None, 400.0, load=c16),
            row(1, k[6], 180.0, load=c1), row(1, k[6], 420.0, load=c16),
            row(2, k[2], 150.0, load=c1), row(2, k[2], 520.0, load=c16)]
    schedule = tune_schedule(rows, loads, noise=0.02)
    assert [level.k for level in schedule.levels] == [6, 2]
    single = [rows[4], rows[5]]  # k=2: the higher geometric mean over both levels
    measured = [replace(rows[2], config=schedule.config(), tokens_per_s=185.0),
                replace(rows[5], config=schedule.config(), tokens_per_s=515.0)]
    slower = [replace(r, tokens_per_s=r.tokens_per_s * 0.7) for r in measured]
    text = _render(StudyOutcome("s", {}, single, schedule, measured, 5))
    assert "num_speculative_tokens_per_batch_size" in text.splitlines()[-1]
    text = _render(StudyOutcome("s", {}, single, schedule, slower, 5))
    assert "measured slower than the best single config (ngram k=2)" in text
    assert text.splitlines()[-1].strip() == """--speculative-config '{"method": "ngram", "num_speculative_tokens": 2}'"""


def _render(outcome) -> str:
    console = Console(record=True, width=300)
    console.print(schedule_text(outcome))
    return console.export_text()
