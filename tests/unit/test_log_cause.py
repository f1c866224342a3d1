"""Cause extraction on logs of real failed vLLM starts (0.32 CPU build; one 0.26 start on an H200)."""

from pathlib import Path

from tuner.engine.log_cause import failure_cause, read_tail

DATA = Path(__file__).resolve().parents[1] / "data"


def test_missing_draft_names_the_draft():
    cause = failure_cause(read_tail(DATA / "log_missing_draft.log"))
    assert cause == ("ValidationError: SpeculativeConfig: Invalid repository ID or local directory "
                     "specified: '/nonexistent/draft-xyz'.")


def test_unknown_key_names_the_key():
    cause = failure_cause(read_tail(DATA / "log_unknown_key.log"))
    assert cause == "ValidationError: SpeculativeConfig: bogus_key: Unexpected keyword argument"


def test_root_cause_above_the_wrapper_wins():
    lines = [
        "(EngineCore pid=42) ERROR 11-30 06:10:03 [core.py:1] ValueError: No available memory for the cache blocks.\n",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n",
    ]
    assert failure_cause(lines) == "ValueError: No available memory for the cache blocks."


def test_no_error_line():
    assert failure_cause(["INFO starting\n", "Killed\n"]) is None
    assert read_tail(DATA / "does-not-exist.log") == []


def test_a_worker_process_s_error_beats_the_engine_s_wrapper():
    # vLLM's CPU worker is "(VllmWorker-0 pid=N)": a prefix with a dash in its name.
    cause = failure_cause(read_tail(DATA / "log_worker_failed.log"))
    assert cause.startswith("ValueError: Available memory on node 0")


def test_a_bare_assertion_names_the_assert_and_where_it_is():
    # vLLM 0.26.0 on an H200: an eagle3 k-by-batch-size schedule fails in Model Runner V2's
    # CUDA-graph capture with a bare AssertionError (benchmarks/data/gpu-schedule-start-failure.log).
    cause = failure_cause(read_tail(DATA / "log_gpu_k_by_batch_size_assertion.log"))
    assert cause == ("AssertionError: assert 0 < num_reqs <= num_tokens "
                     "(vllm/v1/worker/gpu/input_batch.py:109, make_dummy)")
