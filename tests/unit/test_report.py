"""The study's live view and the answer text, rendered to a recording console."""

from datetime import datetime, timezone

from rich.console import Console

from tuner.report import StudyProgressView, answer_text, trials_table
from tuner.search import choose
from tuner.store import TrialRow


def row(number, config, tokens_per_s, status="complete", cause=None):
    return TrialRow(study_name="m | code | concurrency 1", model="m", workload_type="code",
                    load="concurrency 1", optuna_trial_number=number, config=config,
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
